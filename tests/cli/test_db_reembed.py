"""``afi db reembed``: the real CLI moves a store to another embedder, and survives ``kill -9``.

A store written with the hash embedder at 256 dims is refused by a command that opens it with the
default (384 dims), naming the command that moves it over; that command moves it, and a second run
has nothing to do. An unknown name is refused before anything is written. Then the kill trials: the
command is killed with SIGKILL at random points of its batches (five times on SQLite, once on
PostgreSQL) and once in its last transaction, the swap (on SQLite, seen by its write lock). After
every kill the store's ``meta`` names the embedder every stored vector came from (the old one until
the swap, the new one after), no progress committed is lost and no note is staged twice; a last run
goes to the end and every note's vector is then a fresh embedding of its text. Figures: kills, how
many landed while the command ran, the notes staged after each, failures (zero).
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from afi.providers.memory import HashEmbedder, create_memory_fabric, space_memory
from afi.providers.memory.fabric.reembed import STAGED, TARGET
from afi.providers.memory.fabric.vector_bytes import unpack_vector
from afi.storage.database import Database, open_database
from tests.support.cli import AFI, afi
from tests.support.postgres import Databases
from tests.support.warm import AfiPopen

OLD, NEW = HashEmbedder(256), HashEmbedder(384)
SEED = 31
KILLS = 6  # five during the batches, one in the swap's transaction


def _seed(db: str, notes: int) -> None:
    """``notes`` notes over two spaces with the old embedder, a few of them with a second version."""
    for space in ("default", "other"):
        fabric = create_memory_fabric(space_memory(db, space, embedder=OLD), consolidate=False)
        for n in range(notes // 2 - 10):
            fabric.remember(kind="fact", content=f"{space} note {n}: okapi {n * 7919 % 1000} gate {n % 13}")
        for n in range(5):
            fabric.remember(kind="fact", name=f"named-{n}", content=f"{space} named {n}, first version")
            fabric.remember(kind="fact", name=f"named-{n}", content=f"{space} named {n}, second version")
        fabric.memory.close()


def _env() -> dict[str, str]:
    environ = {**os.environ, "COLUMNS": "200"}
    for name in ("AFI_DB", "AFI_ROOT", "AFI_SPACE"):
        environ.pop(name, None)
    return environ


def _files(db: Path) -> list[bytes]:
    """The store file's bytes, and its write-ahead log's."""
    return [path.read_bytes() for path in (db, db.with_name(db.name + "-wal")) if path.exists()]


def _reembed(db: str, root: Path, *args: str) -> subprocess.Popen[str]:
    return AfiPopen([str(AFI), "db", "reembed", "--embedder", "hash", *args, "--db", db, "--root", str(root)],
                    env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _floats(value: Any) -> bytes:
    if hasattr(value, "to_numpy"):  # a PostgreSQL halfvec or sparsevec
        return bytes(value.to_numpy().astype(np.float32).tobytes())
    return bytes(unpack_vector(value).tobytes())


def _state(db: str) -> tuple[str | None, int, int, list[str]]:
    """The embedder ``meta`` names, the notes, the notes staged, and what is wrong: a vector that is
    not its note's text embedded by that embedder, a note staged twice, staging left after the swap."""
    database = open_database(db)
    with database.read() as conn:
        named = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dims')").fetchall())
        rows = conn.execute("SELECT content, embedding FROM notes ORDER BY rowid").fetchall()
        staging = bool(database.engine.table_columns(conn, STAGED))
        staged, distinct = (0, 0)
        if staging:
            staged, distinct = conn.execute(f"SELECT COUNT(*), COUNT(DISTINCT note_rowid) FROM {STAGED}").fetchone()
    wrong: list[str] = []
    embedder = {OLD.name: OLD, NEW.name: NEW}.get(named.get("embedder", ""))
    if embedder is None or named.get("dims") != str(embedder.dims):
        return named.get("embedder"), len(rows), int(staged), [f"meta names {named}"]
    fresh = embedder.embed([content for content, _ in rows]).astype(np.float16).astype(np.float32)
    stale = [content for (content, vector), want in zip(rows, fresh, strict=True) if _floats(vector) != want.tobytes()]
    if stale:
        wrong.append(f"{len(stale)} vectors are not {embedder.name}'s, which meta names: {stale[:2]}")
    if staged != distinct:
        wrong.append(f"{staged} staged rows for {distinct} notes")
    if embedder is NEW and staging:
        wrong.append("the staging is left after the swap")
    return embedder.name, len(rows), int(staged), wrong


def _staged(database: Database) -> int:
    with database.read() as conn:
        if not database.engine.table_columns(conn, TARGET):
            return 0
        return int(conn.execute(f"SELECT COUNT(*) FROM {STAGED}").fetchone()[0])


def _until(database: Database, staged: int, proc: subprocess.Popen[str], limit: float = 60) -> None:
    """Wait until ``staged`` notes are staged (or the command has ended)."""
    ends = time.monotonic() + limit
    while time.monotonic() < ends and proc.poll() is None and _staged(database) < staged:
        time.sleep(0.002)


def _swapping(db: str, proc: subprocess.Popen[str], limit: float = 60) -> None:
    """Wait until a SQLite store's write lock is taken (after the last batch: by the swap's transaction)."""
    probe = sqlite3.connect(db, timeout=0, isolation_level=None)
    ends = time.monotonic() + limit
    try:
        while time.monotonic() < ends and proc.poll() is None:
            try:
                probe.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError:  # locked: the swap is under way
                return
            probe.execute("ROLLBACK")
            time.sleep(0.0005)
    finally:
        probe.close()


def _trials(db: str, root: Path, notes: int, during: int, swap: bool) -> str:
    """Kill ``afi db reembed`` ``during`` times while it stages (and with ``swap``, on SQLite, once more in
    its last transaction), check the store after each, then run it to the end; return the figures."""
    rng = random.Random(f"{SEED} {notes}")
    database = open_database(db)
    failures: list[str] = []
    staged_after: list[int] = []
    landed = 0
    seen = 0
    swapped_by_kill: str | None = None
    for trial in range(during + swap):
        proc = _reembed(db, root, "--batch", "2")
        if trial < during:
            _until(database, seen + 1, proc)
            time.sleep(rng.uniform(0, 0.03))
        else:
            _until(database, notes, proc)
            _swapping(db, proc)
        landed += proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        embedder, count, staged, wrong = _state(db)
        failures += [f"kill {trial}: {problem}" for problem in wrong]
        if count != notes:
            failures.append(f"kill {trial}: {count} notes, {notes} before")
        if embedder == OLD.name and staged < seen:
            failures.append(f"kill {trial}: {staged} notes staged, {seen} before it: progress was lost")
        seen = staged if embedder == OLD.name else notes
        staged_after.append(seen)
        if trial >= during:
            swapped_by_kill = f"the kill in the swap left the store on {embedder}"
    last = _reembed(db, root)
    out, err = last.communicate(timeout=120)
    if last.returncode != 0:
        failures.append(f"the last run failed: {err.strip()[-300:]}")
    embedder, count, staged, wrong = _state(db)
    failures += [f"after the last run: {problem}" for problem in wrong]
    if embedder != NEW.name or count != notes:
        failures.append(f"after the last run: meta names {embedder}, {count} notes")
    figures = (f"{db}: {notes} notes, {during + swap} kills ({during} during the batches, {int(swap)} in the swap), "
               f"{landed} while the command ran, notes staged after each: {staged_after}; {swapped_by_kill}; "
               f"last run: {out.strip().splitlines()[-1] if out.strip() else err.strip()[-200:]}; "
               f"{len(failures)} failures")  # fmt: skip
    print(figures)
    assert landed == during + swap, figures
    assert failures == [], figures + ":\n" + "\n".join(failures)
    return figures


def test_a_store_of_another_embedder_is_refused_then_moved_over(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    _seed(str(db), 40)
    refused = afi("ls", "/facts", db=db)
    assert refused.returncode == 2
    assert "'hash-fnv1a-256' (256 dims)" in refused.stderr and "'hash-fnv1a-384' (384 dims)" in refused.stderr
    assert "afi db reembed --embedder hash`" in refused.stderr, refused.stderr

    moved = afi("db", "reembed", "--embedder", "hash", db=db)  # the command the refusal names
    assert moved.returncode == 0, moved.stderr
    assert "40 notes re-embedded, 'hash-fnv1a-256' (256 dims) -> 'hash-fnv1a-384' (384 dims)" in moved.stdout
    assert "re-embedding" in moved.stdout and "swapping" in moved.stdout  # the progress bars
    assert _state(str(db))[0] == NEW.name and _state(str(db))[3] == []
    listed = afi("ls", "/facts", db=db)
    assert listed.returncode == 0, listed.stderr

    again = afi("db", "reembed", "--embedder", "hash-fnv1a-384", db=db)  # the name a store records, too
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [f"{db}: already on embedder 'hash-fnv1a-384' (384 dims); nothing to do"]


def test_an_unknown_embedder_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    _seed(str(db), 20)
    before = _files(db)
    refused = afi("db", "reembed", "--embedder", "word2vec", db=db)
    assert refused.returncode == 2 and refused.stdout == ""
    line = refused.stderr.strip()
    assert line.startswith("afi: invalid_path: ") and "word2vec" in line and "\n" not in line, line
    assert _files(db) == before and _staged(open_database(str(db))) == 0 and _state(str(db))[0] == OLD.name
    missing = afi("db", "reembed", "--embedder", "hash", db=tmp_path / "none.db")
    assert missing.returncode == 2 and "no store here" in missing.stderr
    assert not (tmp_path / "none.db").exists()


def test_reembed_has_help(tmp_path: Path) -> None:
    shown = afi("db", "reembed", "-h", db=tmp_path / "afi.db")
    assert shown.returncode == 0 and "--embedder" in shown.stdout and "--batch" in shown.stdout
    assert "reembed" in afi("db", "-h", db=tmp_path / "afi.db").stdout


@pytest.mark.slow
def test_kill_9_during_a_reembed_then_a_run_to_the_end(tmp_path: Path) -> None:
    db = str(tmp_path / "afi.db")
    _seed(db, 3000)
    _trials(db, tmp_path / "files", 3000, during=KILLS - 1, swap=True)


def test_kill_9_during_a_reembed_of_a_postgresql_store(tmp_path: Path, postgres_databases: Databases) -> None:
    url = postgres_databases.fresh()
    try:
        _seed(url, 200)
        _trials(url, tmp_path / "files", 200, during=1, swap=False)
    finally:
        postgres_databases.drop(url)
