"""``kill -9`` during ``afi import``, whatever the source: the store holds all of it or none of it, and the
next open of the store leaves no debris in the workspace root.

Each source is imported once whole (the reference: the store's rows and workspace files once it is
in), then again and again into a fresh copy of the same store, each run the real CLI in its own
process, killed at a random moment (seeded) of its write phase: once the space's claim file
appears (the import is past reading and checking its source), within the time the claim was held in
the reference run. After each kill the rows must be the untouched or the complete ones; then
``afi ls /`` opens the store, after which the root must hold no ``.afi-*`` leftover and the
workspace files must be the ones that go with those rows. Sources: a Markdown folder (on SQLite
and PostgreSQL), a Markdown folder whose long notes become files over files already there, an MCP
memory graph, a mem0 export, a Claude ``/memories`` folder over files already there, and a bundle
of two spaces. Figures: kills per source, how many landed in the write phase, failures (zero).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from afi.clients import LocalClient
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from afi.storage.database import is_postgres_url
from tests.support import warm
from tests.support.postgres import Databases
from tests.support.warm import AFI, AfiPopen

SEED = 29
State = tuple[Any, ...]


@dataclass
class Source:
    """A source to import: how to write it into a folder, the import's arguments, and what the store
    holds before (``seed`` writes it through the provider), the space the claim names."""

    write: Callable[[Path], Path]
    args: tuple[str, ...] = ()
    seed: Callable[[MemoryProvider], None] | None = None
    space: str = "default"
    trials: int = 6


def _markdown(count: int, long_every: int = 0) -> Callable[[Path], Path]:
    def write(folder: Path) -> Path:
        notes = folder / "notes"
        notes.mkdir()
        for n in range(count):
            body = f"okapi note {n}, see [[Note {(n + 1) % count:03}]]\n"
            if long_every and n % long_every == 0:
                body += "a long note kept as a file. " * 200  # over the 4,000-character note cap
            (notes / f"Note {n:03}.md").write_text(f"---\ntags: [t{n % 7}]\n---\n{body}")
        return notes

    return write


def _mcp_memory(folder: Path) -> Path:
    lines = [{"type": "entity", "name": f"Entity {n}", "entityType": "thing", "observations": [f"fact {n}"]}
             for n in range(1000)]  # fmt: skip
    lines += [{"type": "relation", "from": f"Entity {n}", "to": f"Entity {(n + 1) % 1000}", "relationType": "next"}
              for n in range(1000)]  # fmt: skip
    (folder / "memory.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder / "memory.jsonl"


def _mem0(folder: Path) -> Path:
    records = [{"id": f"m{n}", "memory": f"prefers okapi number {n}", "categories": ["pets"]} for n in range(1200)]
    (folder / "mem0.json").write_text(json.dumps({"results": records}))
    return folder / "mem0.json"


def _memories(folder: Path) -> Path:
    memories = folder / "memories"
    for n in range(150):
        (memories / f"dir{n % 5}").mkdir(parents=True, exist_ok=True)
        (memories / f"dir{n % 5}" / f"file-{n:03}.md").write_text(f"memory {n}: okapi\n" * 30)
    return memories


def _files_already_there(provider: MemoryProvider) -> None:
    """Files the import replaces (their old bytes must come back) and a note it keeps."""
    client = LocalClient(provider, Caller(principal="local", space="default"))
    client.write("/facts/kept.md", b"the store held this before the import")
    for n in range(0, 150, 10):
        client.write(f"/files/memories/dir{n % 5}/file-{n:03}.md", f"old bytes of {n}\n".encode())
        client.write(f"/files/notes/Note {n:03}.md", f"old bytes of note {n}\n".encode())


def _bundle(folder: Path) -> Path:
    provider = MemoryProvider(folder / "src.db", folder / "src-files")
    for space in ("alpha", "beta"):
        client = LocalClient(provider, Caller(principal="local", space=space))
        for n in range(150):
            client.write(f"/facts/fact-{n:03}.md", f"{space} fact {n}: the okapi gate".encode())
        for n in range(40):
            client.write(f"/files/dir{n % 4}/file-{n:03}.txt", f"{space} bytes {n}\n".encode() * 20)
    store = ["--db", str(folder / "src.db"), "--root", str(folder / "src-files")]
    done = warm.run([str(AFI), "export", "-o", str(folder / "bundle"), *store], capture_output=True, text=True,
                    timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return folder / "bundle"


SOURCES: dict[str, Source] = {
    "markdown": Source(_markdown(300), trials=7),
    "markdown, long notes as files over files already there": Source(_markdown(150, 10), seed=_files_already_there),
    "mcp-memory": Source(_mcp_memory, trials=5),
    "mem0": Source(_mem0, trials=5),
    "claude memories over files already there": Source(_memories, seed=_files_already_there),
    "bundle of two spaces": Source(_bundle, space="alpha"),
}


def _env() -> dict[str, str]:
    environ = {**os.environ, "COLUMNS": "200"}
    for name in ("AFI_DB", "AFI_ROOT", "AFI_SPACE"):
        environ.pop(name, None)
    return environ


def _afi(args: list[str], db: str, root: Path) -> subprocess.Popen[str]:
    return AfiPopen([str(AFI), *args, "--db", db, "--root", str(root)], env=_env(),
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _rows(db: str) -> State:
    """The store's rows an import writes: notes, workspace files (path, size), file versions, ledger entries."""
    named = "CASE WHEN kind = 'file' THEN path ELSE name END"  # a file note is named by its id: another each run
    queries = (f"SELECT resource_id, kind, {named}, content, status FROM notes ORDER BY 1, 2, 3, 4, 5",
               "SELECT space, path, size FROM workspace_files ORDER BY 1, 2",
               "SELECT space, path, sha256 FROM file_versions ORDER BY 1, 2, 3",
               "SELECT count(*) FROM ledger_entries")  # fmt: skip
    if is_postgres_url(db):
        with psycopg.connect(db) as conn:
            return tuple(tuple(map(tuple, conn.execute(q).fetchall())) for q in queries)
    import sqlite3

    with sqlite3.connect(db) as conn:
        return tuple(tuple(conn.execute(q).fetchall()) for q in queries)


def _disk(root: Path) -> dict[str, str]:
    """Every file under the root (leftovers included) and the SHA-256 of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


def _debris(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".afi-*"))


def _store(folder: Path, source: Source, url: str | None) -> tuple[str, Path]:
    """A store as the import finds it (what ``seed`` writes), SQLite in ``folder`` or the PostgreSQL ``url``."""
    folder.mkdir()
    db, root = url or str(folder / "afi.db"), folder / "files"
    provider = MemoryProvider(db, root)
    if source.seed is not None:
        source.seed(provider)
    return db, root


def _claimed(proc: subprocess.Popen[str], root: Path, space: str, limit: float) -> bool:
    """Wait for the import's claim on ``space`` (its write phase), at most ``limit`` seconds."""
    ends = time.monotonic() + limit
    while time.monotonic() < ends and proc.poll() is None:
        if (root / f".afi-claim-{space}").exists():
            return True
        time.sleep(0.005)
    return False


@dataclass
class Reference:
    """A whole run: the rows and files before and after it, and how long its claim was held (None: it took
    none, then the whole run's time)."""

    before: tuple[State, dict[str, str]]
    after: tuple[State, dict[str, str]]
    writing: float
    claims: bool


def _reference(folder: Path, source: Source, args: list[str], url: str | None) -> Reference:
    db, root = _store(folder, source, url)
    before = _rows(db), _disk(root)
    started = time.monotonic()
    proc = _afi(args, db, root)
    claims = _claimed(proc, root, source.space, 120)
    claimed = time.monotonic() if claims else started
    while (root / f".afi-claim-{source.space}").exists():  # released once the import's transaction has ended
        time.sleep(0.005)
    _, err = proc.communicate(timeout=300)
    writing = time.monotonic() - claimed
    assert proc.returncode == 0, err
    after = _rows(db), _disk(root)
    assert after[0] != before[0] and _debris(root) == []
    return Reference(before, after, writing, claims)


def _trials(tmp_path: Path, name: str, source: Source, urls: Callable[[], str | None]) -> str:
    """Import ``source`` whole (twice: the shorter write phase bounds the kills), then ``source.trials``
    times killed in its write phase; return the figures."""
    given = tmp_path / "source"
    given.mkdir()
    path = source.write(given)
    args = ["import", str(path), *source.args]
    runs = [_reference(tmp_path / f"reference-{n}", source, args, urls()) for n in range(2)]
    (before_rows, before_disk), (complete_rows, complete_disk) = runs[0].before, runs[0].after
    writing, claims = min(run.writing for run in runs), runs[0].claims
    rng = random.Random(f"{SEED} {name}")
    failures: list[str] = []
    landed = outcomes = 0
    for trial in range(source.trials):
        db, root = _store(tmp_path / f"trial-{trial}", source, urls())
        proc = _afi(args, db, root)
        delay = rng.uniform(0, 0.8) * writing if claims else rng.uniform(0.3, 0.95) * writing
        if claims and not _claimed(proc, root, source.space, 120):
            failures.append(f"trial {trial}: the import took no claim on {source.space!r}")
        time.sleep(delay)
        killed = proc.poll() is None and (not claims or (root / f".afi-claim-{source.space}").exists())
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        landed += killed
        rows = _rows(db)
        outcomes += rows == complete_rows
        if rows not in (before_rows, complete_rows):
            failures.append(f"trial {trial} (killed {delay:.2f} s into the write phase): the store holds part of "
                            f"the import ({len(rows[0])} notes; none: {len(before_rows[0])}, all: "
                            f"{len(complete_rows[0])})")  # fmt: skip
            continue
        opened = _afi(["ls", "/"], db, root)
        _, err = opened.communicate(timeout=120)
        if opened.returncode != 0:
            failures.append(f"trial {trial}: the next open failed: {err.strip()[-300:]}")
        if _debris(root):
            failures.append(f"trial {trial}: the next open left {_debris(root)[:5]} in the root")
        expected = complete_disk if rows == complete_rows else before_disk
        if _disk(root) != expected:
            differ = sorted(set(_disk(root).items()) ^ set(expected.items()))
            failures.append(f"trial {trial}: the workspace files are not the ones of the rows: {differ[:4]}")
    figures = (f"{name}: {source.trials} kills, {landed} in the write phase (which took {writing:.1f} s), "
               f"{outcomes} left it whole, {source.trials - outcomes} untouched, {len(failures)} failures")  # fmt: skip
    print(figures)
    assert landed >= source.trials // 3, figures  # a loaded machine may finish a phase sooner than it took before
    assert failures == [], figures + ":\n" + "\n".join(failures)
    return figures


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SOURCES))
def test_kill_9_during_an_import_leaves_all_or_nothing_and_no_debris(name: str, tmp_path: Path) -> None:
    _trials(tmp_path, name, SOURCES[name], lambda: None)


@pytest.mark.slow
def test_kill_9_during_a_markdown_import_into_postgresql(tmp_path: Path, postgres_databases: Databases) -> None:
    made: list[str] = []

    def fresh() -> str:
        made.append(postgres_databases.fresh())
        return made[-1]

    try:
        _trials(tmp_path, "markdown (PostgreSQL)", Source(_markdown(300), trials=5), fresh)
    finally:
        for url in made:
            postgres_databases.drop(url)
        shutil.rmtree(tmp_path, ignore_errors=True)
