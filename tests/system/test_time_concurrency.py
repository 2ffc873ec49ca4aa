"""Writers through HTTP (``afi serve``) while ``afi gc`` and ``afi space restore`` run in other processes.

Three writer threads keep writing workspace files and facts over HTTP. Meanwhile the CLI runs, one
after the other, ``gc --keep-days 1``, ``gc --keep-days 0``, ``space restore default@<early>``,
``gc --keep-days 0`` and a second restore. The store was seeded with file versions days old, so
``gc --keep-days 1`` has a past to drop while instants of the last day must stay exact.

Checks, with figures: no 5xx answer; every path's last acknowledged write is readable afterwards,
as the current bytes or under ``/history``; every write that began after the last gc's boundary is
too; and the tree at instants after the ``--keep-days 1`` boundary reads the same bytes before and
after that gc (read while the writers ran).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from afi.clients import LocalClient
from afi.errors import AfiError
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from tests.support import warm
from tests.support.servers import start_afi_serve
from tests.support.warm import AFI

OWNER = Caller(principal="local", space="default")
SEEDED = 40


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Log:
    """Acknowledged writes: path -> [(content, began, acknowledged)], and any 5xx seen."""

    writes: dict[str, list[tuple[bytes, float, float]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _writer(url: str, n: int, log: Log, stop: threading.Event) -> None:
    with httpx.Client(base_url=url, timeout=60) as client:
        i = 0
        while not stop.is_set():
            path = f"/files/w{n}/f{i % 6}.txt" if i % 3 else f"/facts/w{n}-{i % 4}.md"
            body = f"writer {n} write {i} to {path}\n".encode()
            began = time.time()
            answer = client.put("/afi/write", params={"path": path}, content=body)
            with log.lock:
                if answer.status_code == 200:
                    log.writes.setdefault(path, []).append((body, began, time.time()))
                elif answer.status_code >= 500:
                    log.errors.append(f"{answer.status_code} {path}: {answer.text[:200]}")
                else:
                    log.refused += 1
            i += 1


def _seed(db: Path, root: Path) -> list[str]:
    """Files with versions 3 days, 2 days and 6 hours old, and today's; returns the instants to check."""
    provider = MemoryProvider(db, root)
    client = LocalClient(provider, OWNER)
    files = provider._space("default").files
    now = datetime.now(UTC)
    for k in range(SEEDED):
        path = f"seed/s{k:02}.txt"
        client.write(f"/files/{path}", f"today {k}\n".encode())
        for days, label in ((3, "three days"), (2, "two days"), (0.25, "six hours")):
            files.record_write(path, f"{label} ago {k}\n".encode(), _iso(now - timedelta(days=days)))
    return [_iso(now - timedelta(hours=h)) for h in (20, 5, 1)]


def _view(url: str, at: str) -> dict[str, bytes]:
    """Every file of ``/.afi/at/<at>/files``, read."""
    out: dict[str, bytes] = {}
    folders = [f"/.afi/at/{at}/files"]
    with httpx.Client(base_url=url, timeout=60) as client:
        while folders:
            listed = client.get("/afi/list", params={"path": folders.pop(), "limit": 1000})
            listed.raise_for_status()
            for entry in listed.json()["entries"]:
                if entry["type"] == "directory":
                    folders.append(entry["path"])
                else:
                    read = client.get("/afi/read", params={"path": entry["path"]})
                    read.raise_for_status()
                    out[entry["path"].split("/files/", 1)[1]] = read.content
    return out


def _cli(*args: str, db: Path, root: Path) -> dict[str, object]:
    environ = {**os.environ, "AFI_DB": str(db), "AFI_ROOT": str(root), "COLUMNS": "200"}
    done = warm.run([str(AFI), *args, "--json"], capture_output=True, text=True, env=environ, timeout=300,
                    check=False)  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _kept(db: Path, root: Path) -> dict[str, set[bytes]]:
    """Path -> every content readable now for it: current, or a kept version under /history."""
    client = LocalClient(MemoryProvider(db, root), OWNER)
    out: dict[str, set[bytes]] = {}
    history = [e.path for e in client.list("/history", limit=10_000).entries if e.type == "file"]
    note_texts = [client.read(p).data for p in history]
    for folder in ("/files/w0", "/files/w1", "/files/w2", "/facts"):
        try:
            entries = client.list(folder, limit=10_000).entries
        except AfiError:
            continue
        for entry in entries:
            out.setdefault(entry.path, set()).add(client.read(entry.path).data)
            if entry.path.startswith("/files/"):
                rel = entry.path.removeprefix("/files/")
                for version in client.list(f"/history/files/{rel}", limit=10_000).entries:
                    out[entry.path].add(client.read(version.path).data)
    out["notes"] = set(note_texts)
    return out


def _readable(path: str, body: bytes, kept: dict[str, set[bytes]]) -> bool:
    if path.startswith("/files/"):
        return body in kept.get(path, set())
    text = body.rstrip(b"\n")
    return any(text in data for data in kept.get(path, set()) | kept["notes"])


@pytest.mark.slow
def test_writers_during_gc_and_restore_lose_nothing_acknowledged(tmp_path: Path) -> None:
    db, root = tmp_path / "afi.db", tmp_path / "files"
    instants = _seed(db, root)
    log = Log()
    stop = threading.Event()
    with start_afi_serve(db, root, "--no-mcp") as server:
        threads = [threading.Thread(target=_writer, args=(server.url, n, log, stop)) for n in range(3)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)
        views = {at: _view(server.url, at) for at in instants}
        kept_day = _cli("gc", "--keep-days", "1", db=db, root=root)
        after = {at: _view(server.url, at) for at in instants}
        boundaries = [str(kept_day["boundary"])]
        boundaries.append(str(_cli("gc", "--keep-days", "0", db=db, root=root)["boundary"]))
        time.sleep(0.5)
        mid = _iso(datetime.now(UTC))  # after the last boundary: restore reads an exact past
        time.sleep(1.0)
        restored = _cli("space", "restore", f"default@{mid}", db=db, root=root)
        _cli("space", "restore", f"default@{mid}", db=db, root=root)
        boundaries.append(str(_cli("gc", "--keep-days", "0", db=db, root=root)["boundary"]))
        time.sleep(0.5)
        stop.set()
        for thread in threads:
            thread.join(60)
    kept = _kept(db, root)
    lost: list[str] = []
    last_gc = datetime.fromisoformat(boundaries[-1].replace("Z", "+00:00")).timestamp()
    total = 0
    for path, writes in log.writes.items():
        total += len(writes)
        body = writes[-1][0]
        if not _readable(path, body, kept):
            lost.append(f"{path}: its last acknowledged write {body!r}")
        lost += [f"{path}: {b!r}, begun after the last gc's boundary" for b, began, _ in writes
                 if began > last_gc + 0.01 and not _readable(path, b, kept)]  # fmt: skip
    changed = [f"{at}: {sorted(set(views[at].items()) ^ set(after[at].items()))[:3]}" for at in instants
               if views[at] != after[at]]  # fmt: skip
    back, facts = restored["files_written"], restored["changed"]
    assert isinstance(back, list) and isinstance(facts, list)
    print(f"{total} acknowledged writes over {len(log.writes)} paths, {log.refused} refused, "
          f"{len(log.errors)} 5xx, {len(lost)} lost; {len(instants)} instants after the boundary, "
          f"{len(changed)} changed by gc; restore wrote back {len(back)} files and {len(facts)} facts")  # fmt: skip
    assert total > 50, "the writers did not write enough to test anything"
    assert back and facts, restored
    assert all(len(views[at]) >= SEEDED for at in instants), {at: len(v) for at, v in views.items()}
    assert log.errors == [] and lost == [] and changed == [], (log.errors, lost, changed)
