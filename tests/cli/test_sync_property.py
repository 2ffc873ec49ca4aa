"""The sync's property test as the issue states it: two stores, a thousand random operations on each
(remember, edit, forget, move, file write, overwrite, delete, mkdir, and the ledger, blocks and
snapshots), ``afi sync`` at random moments in random directions, some killed with ``kill -9`` in the
middle; then one more sync both ways, and ``afi export`` of both stores holds the same, with every
version written anywhere on both sides. Two things in a bundle are each store's own and are left out
of the comparison: the files' modification times on its disk, and the order in which it received
the versions (``order``, its row order)."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from afi.auth.keys import LOCAL_OWNER
from afi.errors import AfiError
from afi.providers.memory.provider import MemoryProvider
from tests.support.cli import AFI, afi

SEED = 2026
OPERATIONS = 1000  # on each store


def _store(db: Path) -> MemoryProvider:
    return MemoryProvider(db, db.parent / f"{db.stem}.files")


def _op(rng: random.Random, p: MemoryProvider, written: set[str]) -> str:
    """One thing a user does, at random; the kind of operation done (or ``refused``)."""
    names, paths = [f"n{i}" for i in range(12)], ["a.txt", "b.md", "dir/c.txt", "dir/sub/d.txt", "e.txt"]
    memory = p.fabric("default").memory
    current = [n for n in memory.store.select_notes(memory.scope, "valid_to IS NULL AND status = 'active'")
               if n.kind != "file"]  # fmt: skip
    roll = rng.random()
    try:
        if roll < 0.22 or not current:
            note = p.remember(LOCAL_OWNER, kind="fact", name=rng.choice(names), content=f"fact {rng.randrange(10**9)}")
            written.add(note.id)
            return "remember"
        if roll < 0.30:
            note = p.remember(LOCAL_OWNER, kind="fact", content=f"loose thought {rng.randrange(10**9)}")
            written.add(note.id)
            return "remember"
        if roll < 0.38:
            target = rng.choice(current)
            note = p.remember(LOCAL_OWNER, kind=target.kind, content=f"edited {rng.randrange(10**9)}",
                              supersedes=target.id)  # fmt: skip
            written.add(note.id)
            return "edit"
        if roll < 0.44:
            p.forget(LOCAL_OWNER, id=rng.choice(current).id)
            return "forget"
        if roll < 0.48:
            target = rng.choice([n for n in current if n.name] or current)
            p.move(LOCAL_OWNER, f"/facts/{target.name}.md", f"/facts/{rng.choice(names)}.md")
            return "move"
        if roll < 0.62:
            p.write(LOCAL_OWNER, f"/files/{rng.choice(paths)}", f"bytes {rng.randrange(10**9)}\n".encode())
            return "file write"
        if roll < 0.68:
            p.write(LOCAL_OWNER, f"/files/{rng.choice(paths)}", f"{rng.randrange(10**6)}\n".encode(), append=True)
            return "overwrite"
        if roll < 0.73:
            p.delete(LOCAL_OWNER, f"/files/{rng.choice([*paths, 'dir', 'dir/sub', 'empty'])}", recursive=True)
            return "delete"
        if roll < 0.77:
            p.move(LOCAL_OWNER, f"/files/{rng.choice(paths)}", f"/files/{rng.choice(paths)}", overwrite=True)
            return "move"
        if roll < 0.81:
            p.mkdir(LOCAL_OWNER, f"/files/{rng.choice(['empty', 'dir/new', 'made/deep'])}", parents=True)
            return "mkdir"
        if roll < 0.89:
            message = {"role": "user", "text": f"said {rng.randrange(10**6)}", "entry_id": f"e{rng.randrange(10**9)}"}
            p.ledger_write(LOCAL_OWNER, "append", f"chat-{rng.randrange(3)}", {"messages": [message]})
            return "ledger"
        if roll < 0.95:
            p.append_block(LOCAL_OWNER, f"b{rng.randrange(3)}", f"line {rng.randrange(10**6)}")
            return "block"
        p.snapshot_create(LOCAL_OWNER, f"s{rng.randrange(10**6)}")
        return "snapshot"
    except AfiError:
        return "refused"  # a move onto itself, a delete of what is not there, a name taken


def _sync(rng: random.Random, here: Path, there: Path, direction: list[str], kill: bool) -> bool:
    """Run ``afi sync`` between the two stores; with ``kill``, SIGKILL it at a random moment after a
    batch committed. True when the kill landed before it finished."""
    if not kill:
        done = afi("sync", str(there), *direction, db=here)
        assert done.returncode == 0, done.stderr
        return False
    errors = here.parent / "sync-stderr.txt"
    with errors.open("wb") as sink:
        process = subprocess.Popen([str(AFI), "sync", str(there), "--db", str(here), *direction],
                                   stdout=subprocess.DEVNULL, stderr=sink)  # fmt: skip
        before = _applied(here) + _applied(there)
        while process.poll() is None and _applied(here) + _applied(there) == before:
            time.sleep(0.005)  # until a batch has committed on either side: the kill lands part-way
        time.sleep(rng.uniform(0, 0.05))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        returncode = process.wait()
    if returncode != -signal.SIGKILL:
        assert returncode == 0, errors.read_text()
        return False
    return True


def _applied(db: Path) -> int:
    """How many sync batches this store has applied (each is audited)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return int(conn.execute("SELECT count(*) FROM audit WHERE verb = 'sync'").fetchone()[0])


# what each store has of its own: when its files were written on its disk, and the order in which it
# received the versions (its row order, which the bundle keeps so that an import restores it)
_OWN = ("mtime_ns", "order")


def _shared(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shared(v) for k, v in value.items() if k not in _OWN}
    if isinstance(value, list):
        return [_shared(v) for v in value]
    return value


def _exported(db: Path, out: Path) -> dict[str, Any]:
    """The bundle ``afi export`` writes, file by file (JSON read; what is each store's own left out)."""
    done = afi("export", "-o", str(out), db=db)
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        rel = str(path.relative_to(out))
        if rel == "manifest.json":
            continue  # its checksums cover the files' listings with their times; the files are compared here
        data = path.read_bytes()
        if path.suffix == ".json":
            found[rel] = _shared(json.loads(data))
        elif path.suffix == ".jsonl" and rel.endswith("files/versions.jsonl"):  # one line a version, in row order
            found[rel] = sorted(json.dumps(_shared(json.loads(line)), sort_keys=True) for line in data.splitlines())
        elif path.suffix == ".jsonl":
            found[rel] = [_shared(json.loads(line)) for line in data.splitlines() if line.strip()]
        else:
            found[rel] = b"\n".join(line for line in data.split(b"\n") if not line.startswith(b"order: "))
    return found


@pytest.mark.slow
def test_two_stores_a_thousand_operations_each_random_syncs_and_kills_export_the_same(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    laptop, server = tmp_path / "laptop.db", tmp_path / "server.db"
    stores = {laptop: _store(laptop), server: _store(server)}
    written: set[str] = set()
    done: dict[str, int] = {}
    syncs = kills = 0
    for _ in range(2 * OPERATIONS):
        db = rng.choice((laptop, server))
        kind = _op(rng, stores[db], written)
        done[kind] = done.get(kind, 0) + 1
        if rng.random() < 0.03:
            here, there = (laptop, server) if rng.random() < 0.5 else (server, laptop)
            direction = rng.choice([[], ["--pull"], ["--push"]])
            kills += _sync(rng, here, there, direction, kill=rng.random() < 0.35)
            syncs += 1
    _sync(rng, laptop, server, [], kill=False)
    _sync(rng, server, laptop, [], kill=False)
    syncs += 2
    a, b = _exported(laptop, tmp_path / "laptop-export"), _exported(server, tmp_path / "server-export")
    assert sorted(a) == sorted(b), set(a) ^ set(b)
    different = [name for name in a if a[name] != b[name]]
    assert not different, different[:10]
    forgotten = {i for db in stores for i in _forgotten(db)}
    missing = {str(db): written - forgotten - _ids(db) for db in stores}
    assert not any(missing.values()), missing
    print(f"{sum(done.values())} operations ({done.get('refused', 0)} refused: {dict(sorted(done.items()))}), "
          f"{syncs} syncs, {kills} killed part-way (after a batch committed), {len(a)} files in each export, "
          f"every written version ({len(written)}, {len(forgotten)} of them forgotten) on both sides; "
          "failures: 0")  # fmt: skip
    assert sum(done.values()) == 2 * OPERATIONS and kills >= 3


def _ids(db: Path) -> set[str]:
    memory = _store(db).fabric("default").memory
    return {n.id for n in memory.store.select_notes(memory.scope)}


def _forgotten(db: Path) -> set[str]:
    with _store(db).fabric("default").memory.store.read() as conn:
        return {str(r[0]) for r in conn.execute("SELECT note_id FROM note_changes WHERE op = 'delete'").fetchall()}
