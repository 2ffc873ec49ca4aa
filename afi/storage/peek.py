"""Reading a store's ``meta`` before opening it: nothing is migrated, created or changed.

A command that must know what a store records before it opens the store (its workspace root, say)
reads it here, on either engine.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .database import is_postgres_url
from .migrations import file_version
from .schema import holds_anything

__all__ = ["holds_a_store", "peek_meta", "peek_notes_without_vectors"]


def holds_a_store(db: Path | str) -> bool:
    """True when ``db`` holds a store already: a SQLite file that exists, a PostgreSQL database with
    afi-memory's tables."""
    if not is_postgres_url(db):
        return Path(db).expanduser().is_file()
    from .postgres import pg_connect

    with pg_connect(str(db)) as pg:
        found = pg.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
    return bool(found and found[0])


def peek_meta(db: Path | str, key: str, *, since_step: int, before: str) -> str | None:
    """Given a store, return the value it records for ``key`` in ``meta`` (None when none).

    A SQLite store whose schema is older than step ``since_step`` (the step that records the key for
    stores made before it) gives ``before`` when it holds anything, None when it is empty; a file
    that is not a store gives None (the command that opens it says why).
    """
    if not holds_a_store(db):
        return None
    if is_postgres_url(db):
        found = _pg_row(db, "SELECT value FROM meta WHERE key = %s", (key,))
        return str(found[0]) if found is not None else None
    try:
        with _sqlite_read_only(db) as conn:
            if file_version(conn) < since_step:
                return before if holds_anything(conn) else None
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    except sqlite3.DatabaseError:
        return None
    return str(row[0]) if row is not None else None


def peek_notes_without_vectors(db: Path | str) -> int | None:
    """Given a store, return how many of its notes wait for their vectors (a sentence embedder's are
    made after the write); None when ``db`` holds no store or none can be read."""
    if not holds_a_store(db):
        return None
    sql = "SELECT COUNT(*) FROM notes WHERE embedding IS NULL"
    if is_postgres_url(db):
        found = _pg_row(db, sql, ())
        return int(found[0]) if found is not None else None
    try:
        with _sqlite_read_only(db) as conn:
            return int(conn.execute(sql).fetchone()[0])
    except sqlite3.DatabaseError:
        return None


def _pg_row(db: Path | str, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
    from .postgres import pg_connect

    with pg_connect(str(db)) as pg:
        row = pg.execute(sql, params).fetchone()
    return tuple(row) if row is not None else None


@contextmanager
def _sqlite_read_only(db: Path | str) -> Iterator[sqlite3.Connection]:
    """A read-only connection to a SQLite store file (it waits for a writer, as the store's own do)."""
    conn = sqlite3.connect(f"{Path(db).expanduser().resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        yield conn
    finally:
        conn.close()
