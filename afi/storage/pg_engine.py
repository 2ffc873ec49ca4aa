"""The PostgreSQL side of :class:`~.engine.Engine`: writers lock rows, advisory locks serialize a space."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import psycopg

from ..errors import AfiError
from .migrations import Applied
from .pg_derived_notes import RENDERED_SQL
from .pg_trigram import ilike, like_pattern

__all__ = ["POSTGRES"]

T = TypeVar("T")


class PostgresEngine:
    """What a PostgreSQL store does its own way (see :class:`~.engine.Engine`)."""

    # a lost server or an exhausted pool is said as an AfiError (Internal, Conflict) by the pool
    store_errors: tuple[type[Exception], ...] = (psycopg.Error, AfiError)
    one_writer_at_a_time = False
    lock_row = " FOR UPDATE"
    rowid_hint = ""
    note_keeps_front = True
    note_rendering = RENDERED_SQL
    note_rendering_bytes = f"octet_length({RENDERED_SQL})"

    def among(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [list(values)]

    def applied_steps(self, conn: Any) -> list[Applied]:
        from .postgres_schema import applied_pg_steps

        return applied_pg_steps(conn.raw)  # the psycopg connection under the ``?`` placeholders

    def table_columns(self, conn: Any, table: str) -> list[str]:
        rows = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = ? AND is_generated = 'NEVER' ORDER BY ordinal_position",
            (table,),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def choose(self, *, sqlite: T, postgresql: T) -> T:
        return postgresql

    def release(self, database: Any) -> None:
        """The pool is the whole process's: nothing of one part's own to close."""

    def lock_space(self, conn: Any, key: int, space: str) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(?::integer, hashtext(?))", (key, space))

    def lock_scope(self, conn: Any, key: int) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(?)", (key,))

    def prune_receipts(self, conn: Any, before: float) -> None:
        # rows another claim holds are skipped, not waited for: two pruning claims never deadlock
        conn.execute(
            "DELETE FROM afi_receipts WHERE (principal, space, tool, key) IN (SELECT principal, space, tool, key "
            "FROM afi_receipts WHERE started_at < ? FOR UPDATE SKIP LOCKED)",
            (before,),
        )

    def guard_blob(self, conn: Any) -> None:
        # the lock a blob insert takes: gc cannot drop the blob between its check and this commit
        conn.execute("LOCK TABLE file_blobs IN ROW EXCLUSIVE MODE")

    def hold_blobs(self, conn: Any) -> None:
        # a writer's blob insert waits for this, and this for writers mid-way: no blob is lost
        conn.execute("LOCK TABLE file_blobs IN SHARE ROW EXCLUSIVE MODE")

    def new_seqs(self, conn: Any, table: str, column: str, count: int) -> list[int]:
        rows = conn.execute(
            f"SELECT nextval(pg_get_serial_sequence('{table}', '{column}')) FROM generate_series(1, ?)", (count,)
        ).fetchall()
        return sorted(int(r[0]) for r in rows)

    def workspace_candidates(self, space: str, literal: str) -> tuple[str, list[Any]]:
        return f"SELECT rowid, path FROM workspace_files WHERE space = ? AND {ilike('text')}", [
            space,
            like_pattern(literal),
        ]

    def json_texts(self, column: str, key: str) -> str:
        return f"jsonb_array_elements_text({column}::jsonb -> '{key}') AS json_texts(value)"

    def same_name(self, a: str, b: str) -> str:
        # the file-name index, PostgreSQL's only index of names (afi.storage.pg_derived_notes)
        return f"{a}.name IS NOT NULL AND {a}.name || '.md' = {b}.name || '.md'"


POSTGRES = PostgresEngine()
