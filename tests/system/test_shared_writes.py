"""Conditional writes hold across processes: ``afi serve``, ``afi ssh`` and ``afi mount`` on one store.

Writers in every door increment shared counters with ``If-Match`` (HTTP), ``if_match`` (the SSH
``afi`` subsystem) and the mount's own read-modify-write (a close that would overwrite a version it
did not read fails with ESTALE). Every acknowledged increment must be in the final value.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import random
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from afi.auth.keys import KeyStore
from tests.support.fuse import afi_mount, needs_fuse
from tests.support.ssh import OPTS, add_key, keygen, start_afi

FILE_COUNTERS = ("/files/counter-a.txt", "/files/counter-b.txt")
COUNTERS = (*FILE_COUNTERS, "/facts/counter-a.md", "/facts/counter-b.md")
TARGET = 3000  # acknowledged increments, all doors together
SECONDS = 150.0  # the most the writers may take to get there


def _text(value: int) -> str:
    """A counter's text, fixed width: the mount's cached file size stays right while the value grows."""
    return f"{value:08d}"


def _value(text: str) -> int:
    """The counter in a file's bytes or a note's rendered text (its body is the last line)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return int(lines[-1]) if lines else 0


class Tally:
    """Acknowledged increments per counter, and refusals, from all writers."""

    def __init__(self) -> None:
        self.acked: Counter[str] = Counter()
        self.by_door: Counter[str] = Counter()
        self.conflicts = 0
        self.errors: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def ack(self, door: str, path: str) -> None:
        with self.lock:
            self.acked[path] += 1
            self.by_door[door] += 1
            if sum(self.acked.values()) >= TARGET:
                self.stop.set()

    def conflict(self) -> None:
        with self.lock:
            self.conflicts += 1

    def error(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)
            if len(self.errors) > 20:
                self.stop.set()


def http_writer(url: str, token: str, tally: Tally, seed: int) -> None:
    rng = random.Random(seed)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        while not tally.stop.is_set():
            path = rng.choice(COUNTERS)
            read = client.get("/afi/read", params={"path": path})
            if read.status_code != 200:
                tally.error(f"http read {path}: {read.status_code} {read.text[:200]}")
                continue
            wrote = client.put(
                "/afi/write",
                params={"path": path},
                content=_text(_value(read.text) + 1).encode(),
                headers={"If-Match": read.headers["etag"]},
            )
            if wrote.status_code == 200:
                tally.ack("http", path)
            elif wrote.status_code == 409:
                tally.conflict()
            else:
                tally.error(f"http write {path}: {wrote.status_code} {wrote.text[:200]}")


def ssh_writer(port: int, key: Path, tally: Tally, seed: int) -> None:
    """One long ``ssh -s afi`` session sending JSON-RPC reads and conditional writes."""
    rng = random.Random(seed)
    cmd = ["ssh", "-p", str(port), "-i", str(key), *OPTS, "-s", "127.0.0.1", "afi"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    ids = iter(range(1, 1 << 30))

    def call(method: str, params: dict[str, object]) -> dict[str, object]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(
            (json.dumps({"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}) + "\n").encode()
        )
        proc.stdin.flush()
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the ssh session ended")
        return json.loads(line)  # type: ignore[no-any-return]

    try:
        while not tally.stop.is_set():
            path = rng.choice(COUNTERS)
            read = call("read", {"path": path})
            if "result" not in read:
                tally.error(f"ssh read {path}: {read}")
                continue
            result = read["result"]
            assert isinstance(result, dict)
            value = _value(base64.b64decode(str(result["data"])).decode())
            wrote = call("write", {"path": path, "text": _text(value + 1), "if_match": result["etag"]})
            if "result" in wrote:
                tally.ack("ssh", path)
            elif isinstance(wrote.get("error"), dict) and wrote["error"]["data"]["code"] == "conflict":  # type: ignore[index]
                tally.conflict()
            else:
                tally.error(f"ssh write {path}: {wrote}")
    except Exception as err:
        tally.error(f"ssh writer: {err!r}")
    finally:
        proc.stdin.close()
        proc.wait(20)
        proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()


def fuse_writer(mountpoint: Path, tally: Tally, seed: int) -> None:
    """Read, then rewrite in place through one descriptor: the mount stores it only over what was read."""
    rng = random.Random(seed)
    while not tally.stop.is_set():
        path = rng.choice(FILE_COUNTERS)
        where = mountpoint / path.lstrip("/")
        try:
            fd = os.open(where, os.O_RDWR)
        except OSError as err:
            tally.error(f"fuse open {path}: {err!r}")
            continue
        try:
            value = _value(os.pread(fd, 1 << 16, 0).decode())
            data = _text(value + 1).encode()
            os.pwrite(fd, data, 0)
            os.ftruncate(fd, len(data))
        except OSError as err:
            os.close(fd)
            if err.errno == errno.ESTALE:
                tally.conflict()
            else:
                tally.error(f"fuse write {path}: {err!r}")
            continue
        try:
            os.close(fd)
        except OSError as err:
            if err.errno == errno.ESTALE:
                tally.conflict()
            else:
                tally.error(f"fuse close {path}: {err!r}")
            continue
        tally.ack("fuse", path)


@pytest.mark.slow
@needs_fuse
def test_if_match_counters_lose_nothing_across_processes(tmp_path: Path) -> None:
    db, root = tmp_path / "afi.db", tmp_path / "files"
    keys = KeyStore(db)
    _, token = keys.create(space="default", scopes=("afi:write",), name="writer")
    key_id = keys.list()[0].id
    keys.close()
    ssh_key = keygen(tmp_path, "writer")
    add_key(db, ssh_key.with_suffix(".pub"), scopes=("afi:write",), api_key=key_id)
    token_file = tmp_path / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    store = ["--db", str(db), "--root", str(root)]
    with (
        start_afi(["serve", "--host", "127.0.0.1", "--port", "0", "--no-mcp", *store], tmp_path / "xdg") as http,
        start_afi(["ssh", "--host", "127.0.0.1", "--port", "0", "--cmd-rate", "0", *store], tmp_path / "xdg") as ssh,
        afi_mount(tmp_path / "mnt", db, root, "--token", str(token_file)) as mount,
    ):
        url = f"http://127.0.0.1:{http['http']}"
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
            for path in COUNTERS:
                assert client.put("/afi/write", params={"path": path}, content=_text(0).encode()).status_code == 200
        tally = Tally()
        writers = [threading.Thread(target=http_writer, args=(url, token, tally, n)) for n in range(2)]
        writers += [threading.Thread(target=ssh_writer, args=(ssh["ssh"], ssh_key, tally, 10 + n)) for n in range(2)]
        writers += [threading.Thread(target=fuse_writer, args=(mount.path, tally, 20 + n)) for n in range(2)]
        started = time.monotonic()
        for writer in writers:
            writer.start()
        tally.stop.wait(SECONDS)
        tally.stop.set()
        for writer in writers:
            writer.join(60)
        took = time.monotonic() - started
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
            finals = {path: _value(client.get("/afi/read", params={"path": path}).text) for path in COUNTERS}
    total = sum(tally.acked.values())
    lost = {path: tally.acked[path] - finals[path] for path in COUNTERS if finals[path] != tally.acked[path]}
    print(
        f"{total} acknowledged increments in {took:.1f} s ({dict(tally.by_door)}), {tally.conflicts} refused "
        f"as stale, finals {finals}, lost {lost or 0}"
    )
    assert not tally.errors, tally.errors[:5]
    assert not lost, f"acknowledged increments lost: {lost} (acknowledged {dict(tally.acked)}, final {finals})"
    assert total >= TARGET, f"only {total} increments acknowledged in {took:.0f} s"
    assert all(tally.by_door[door] > 0 for door in ("http", "ssh", "fuse")), dict(tally.by_door)


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """The URLs of two ``afi serve`` processes over one store (each test appends to a path of its own)."""
    base = tmp_path_factory.mktemp("two-processes")
    store = ["--db", str(base / "afi.db"), "--root", str(base / "files")]
    with (
        start_afi(["serve", "--host", "127.0.0.1", "--port", "0", "--no-mcp", *store], base / "a") as one,
        start_afi(["serve", "--host", "127.0.0.1", "--port", "0", "--no-mcp", *store], base / "b") as two,
    ):
        yield [f"http://127.0.0.1:{one['http']}", f"http://127.0.0.1:{two['http']}"]


@pytest.mark.parametrize("path", ["/files/appended.txt", "/facts/appended.md"])
def test_appends_from_two_processes_all_land(two_processes: list[str], path: str) -> None:
    """An append reads the note or file and writes it back: two processes appending lose no line."""
    per_writer = 150
    failures: list[str] = []

    def append(url: str, tag: str) -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            for n in range(per_writer):
                answer = client.put(
                    "/afi/write", params={"path": path, "append": "true"}, content=f"{tag}{n}\n".encode()
                )
                if answer.status_code != 200:
                    failures.append(f"{tag}{n}: {answer.status_code} {answer.text[:200]}")

    threads = [threading.Thread(target=append, args=(url, tag)) for url, tag in zip(two_processes, "ab", strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    text = httpx.get(f"{two_processes[0]}/afi/read", params={"path": path}).text
    assert not failures, failures[:5]
    landed = {line for line in text.splitlines() if line[:1] in ("a", "b") and line[1:].isdigit()}
    missing = {f"{tag}{n}" for tag in "ab" for n in range(per_writer)} - landed
    assert not missing, f"{len(missing)} of {2 * per_writer} acknowledged appends lost, e.g. {sorted(missing)[:5]}"
