"""The SQLite side of :class:`~.engine.Engine`: a write transaction holds the whole file."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, TypeVar

from .migrations import Applied, applied_steps
from .trigram import trigram_query

__all__ = ["SQLITE"]

T = TypeVar("T")


class SqliteEngine:
    """What a SQLite store does its own way (see :class:`~.engine.Engine`)."""

    store_errors: tuple[type[Exception], ...] = (sqlite3.Error,)
    one_writer_at_a_time = True
    lock_row = ""
    rowid_hint = "+"
    note_keeps_front = False
    note_rendering = "rendered"
    note_rendering_bytes = "length(CAST(rendered AS BLOB))"

    def among(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({', '.join('?' * len(values))})", list(values)

    def applied_steps(self, conn: Any) -> list[Applied]:
        return applied_steps(conn)

    def table_columns(self, conn: Any, table: str) -> list[str]:
        return [str(r[1]) for r in conn.execute(f"PRAGMA table_xinfo({table})").fetchall() if r[6] == 0]

    def choose(self, *, sqlite: T, postgresql: T) -> T:
        return sqlite

    def release(self, database: Any) -> None:
        database.close()

    def lock_space(self, conn: Any, key: int, space: str) -> None:
        """``BEGIN IMMEDIATE`` took the file's write lock: nothing more to hold."""

    def lock_scope(self, conn: Any, key: int) -> None:
        """``BEGIN IMMEDIATE`` took the file's write lock: nothing more to hold."""

    def prune_receipts(self, conn: Any, before: float) -> None:
        conn.execute("DELETE FROM afi_receipts WHERE started_at < ?", (before,))

    def guard_blob(self, conn: Any) -> None:
        """``afi gc`` waits for the file's write lock this transaction holds."""

    def hold_blobs(self, conn: Any) -> None:
        """The file's write lock is held already."""

    def new_seqs(self, conn: Any, table: str, column: str, count: int) -> list[int]:
        top = int(conn.execute(f"SELECT COALESCE(MAX({column}), 0) FROM {table}").fetchone()[0])
        return list(range(top + 1, top + 1 + count))

    def workspace_candidates(self, space: str, literal: str) -> tuple[str, list[Any]]:
        sql = (
            "SELECT f.rowid, f.path FROM workspace_trigram t CROSS JOIN workspace_files f ON f.rowid = t.rowid "
            "WHERE workspace_trigram MATCH ? AND f.space = ?"
        )
        return sql, [trigram_query([literal]), space]

    def json_texts(self, column: str, key: str) -> str:
        return f"json_each({column}, '$.{key}')"

    def same_name(self, a: str, b: str) -> str:
        return f"{a}.name = {b}.name"  # the (kind, name) index


SQLITE = SqliteEngine()
