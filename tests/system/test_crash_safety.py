"""``kill -9`` in the middle of writes: nothing acknowledged is lost, nothing half-written is seen, and
the temporary files a crash leaves are never shown and are swept at the next start."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.servers import start_afi_serve

KILLS = 7
WRITERS = 4


def _body(path: str, version: int) -> bytes:
    """Version ``version`` of ``path``: large enough that a kill can land in the middle of writing it.

    Random bytes as hex, so a torn write shows wherever it tore. Hex has few distinct trigrams: the
    server indexes it in milliseconds (95 printable characters at random took it 0.4 s a write, most
    of the kill window, and 0.3 s of this process's CPU to make).
    """
    head = f"{path} version {version:06d}\n".encode()
    return head + random.Random(version).randbytes(24 << 10).hex().encode() + b"\nend\n"


def _version(data: bytes) -> int:
    first = data.split(b"\n", 1)[0].decode()
    return int(first.rsplit(" ", 1)[1])


class Acks:
    def __init__(self) -> None:
        self.files: dict[str, int] = {}  # path -> last acknowledged version
        self.notes: dict[str, int] = {}
        self.appended: list[str] = []
        self.lock = threading.Lock()


def writer(url: str, n: int, acks: Acks, stop: threading.Event) -> None:
    file_path, note_path = f"/files/crash/w{n}.txt", f"/facts/crash-w{n}.md"
    with httpx.Client(base_url=url, timeout=10) as client:
        while not stop.is_set():
            try:
                version = acks.files.get(file_path, 0) + 1
                if client.put("/afi/write", params={"path": file_path}, content=_body(file_path, version)).is_success:
                    with acks.lock:
                        acks.files[file_path] = version
                note = acks.notes.get(note_path, 0) + 1
                answer = client.put("/afi/write", params={"path": note_path}, content=f"crash note {note:06d}".encode())
                if answer.is_success:
                    with acks.lock:
                        acks.notes[note_path] = note
                line = f"w{n}-{time.monotonic_ns()}"
                answer = client.put(
                    "/afi/write",
                    params={"path": "/files/crash/log.txt", "append": "true"},
                    content=f"{line}\n".encode(),
                )
                if answer.is_success:
                    with acks.lock:
                        acks.appended.append(line)
            except httpx.HTTPError:
                return  # the server was killed


def _check(url: str, acks: Acks) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        for path, version in acks.files.items():
            data = client.get("/afi/read", params={"path": path}).content
            stored = _version(data)
            assert stored >= version, f"{path}: version {version} was acknowledged, {stored} is stored"
            assert data == _body(path, stored), f"{path}: version {stored} is stored half-written"
        for path, version in acks.notes.items():
            text = client.get("/afi/read", params={"path": path}).text
            stored = int(text.strip().rsplit(" ", 1)[1])
            assert stored >= version, f"{path}: note {version} was acknowledged, {stored} is stored"
        if acks.appended:
            log = set(client.get("/afi/read", params={"path": "/files/crash/log.txt"}).text.splitlines())
            missing = [line for line in acks.appended if line not in log]
            assert not missing, f"{len(missing)} acknowledged appends lost, e.g. {missing[:3]}"
        if acks.files:
            listing = client.get("/afi/list", params={"path": "/files/crash"}).json()["entries"]
            assert not [e["path"] for e in listing if ".afi-tmp-" in e["path"]], listing


def _orphans(root: Path) -> list[str]:
    folder = root / "default" / "crash"
    return [name for name in os.listdir(folder) if name.startswith(".afi-tmp-")] if folder.exists() else []


@pytest.mark.slow
def test_kill_9_during_writes_loses_nothing_acknowledged(tmp_path: Path) -> None:
    db, root = tmp_path / "afi.db", tmp_path / "files"
    acks = Acks()
    rng = random.Random(7)
    orphans_seen = 0
    for _ in range(KILLS):
        with start_afi_serve(db, root, "--no-mcp") as server:
            assert server.process is not None
            _check(server.url, acks)  # what the last kill left, after this start's sweep
            stop = threading.Event()
            threads = [threading.Thread(target=writer, args=(server.url, n, acks, stop)) for n in range(WRITERS)]
            for thread in threads:
                thread.start()
            before = len(acks.appended)
            deadline = time.monotonic() + 20
            while len(acks.appended) == before and time.monotonic() < deadline:
                time.sleep(0.01)  # writing has begun
            time.sleep(rng.uniform(0.05, 0.6))
            os.kill(server.process.pid, signal.SIGKILL)
            server.process.wait(10)
            stop.set()
            for thread in threads:
                thread.join(30)
        orphans_seen += len(_orphans(root))
    with start_afi_serve(db, root) as server:
        _check(server.url, acks)
    left = _orphans(root)
    total = len(acks.files) and sum(acks.files.values()) + sum(acks.notes.values()) + len(acks.appended)
    print(f"{KILLS} kills, {total} acknowledged writes, 0 lost; {orphans_seen} orphaned temporary files swept")
    assert total > KILLS * 5, f"only {total} writes were acknowledged: the test did not exercise much"
    assert not left, left
