"""SQLite connections as every part of the store opens them: WAL, a busy timeout, one per thread.

A thread's connection lives in that thread's ``threading.local`` only, so when the thread ends (worker
pools retire idle threads after a few seconds) a finalizer closes it at once, without waiting for the
cyclic garbage collector (a connection's statement cache refers back to it).
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["BUSY_TIMEOUT_MS", "JOURNAL_SIZE_LIMIT", "MMAP_SIZE", "WAL_AUTOCHECKPOINT_PAGES", "Connections", "configure"]

BUSY_TIMEOUT_MS = 5000
JOURNAL_SIZE_LIMIT = 64 << 20  # a WAL grown by one large write shrinks back to this after a checkpoint
# Pages of the store file are read through a shared memory map instead of each connection's own page
# cache, which SQLite empties whenever any process writes: with one thread per request and writers in
# other processes, that cache was cold nearly every time. The mapped pages are the OS page cache's,
# counted in a process's resident memory but shared by every connection and process.
MMAP_SIZE = 256 << 20
# A committing writer copies the WAL back into the store file (and syncs both) once the WAL holds this
# many pages. A remember with its two FTS5 indexes writes ~23 pages, most of them pages the previous
# ones wrote too: at SQLite's default of 1,000 that was a checkpoint every ~43 notes, about 0.3 ms a note
# at 100k notes; at 4,000 (16 MB) about 0.2 ms. Durability is unchanged: a commit is in the WAL either way.
WAL_AUTOCHECKPOINT_PAGES = 4000


def configure(conn: sqlite3.Connection, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS, wal: bool = True) -> None:
    """Set what every connection of the store needs: the busy timeout, WAL (checkpointed every
    ``WAL_AUTOCHECKPOINT_PAGES``), a bounded journal, the memory map."""
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
        conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA mmap_size = {MMAP_SIZE}")


class _ThreadConnection:
    """One thread's connection, closed by a finalizer when the thread's local storage lets go of it."""

    __slots__ = ("__weakref__", "conn")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        weakref.finalize(self, conn.close)


class Connections:
    """Thread-local connections to one database file, so a FUSE mount, servers and the CLI share it."""

    def __init__(self, db: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self.db = str(db)
        self._busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()

    def get(self) -> sqlite3.Connection:
        """This thread's connection (autocommit: writes go through :meth:`transaction` or are one statement)."""
        held: _ThreadConnection | None = getattr(self._local, "held", None)
        if held is None:
            conn = sqlite3.connect(
                self.db, timeout=self._busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
            )
            configure(conn, busy_timeout_ms=self._busy_timeout_ms, wal=self.db != ":memory:")
            held = _ThreadConnection(conn)
            self._local.held = held
        return held.conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE): committed on success, rolled back on any error."""
        conn = self.get()
        if conn.in_transaction:  # nested: join the outer transaction
            yield conn
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection; every other thread's closes when that thread ends.

        Closing a connection another thread may be using at that moment could crash SQLite, so no
        thread closes another's.
        """
        held: _ThreadConnection | None = getattr(self._local, "held", None)
        if held is not None:
            self._local.held = None
            held.conn.close()
