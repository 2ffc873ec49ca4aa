"""What differs between the two engines, asked of one object chosen when the store opens.

A store's :class:`~.database.Database` carries its :class:`Engine` (``database.engine``): the SQL and
the behaviours where SQLite and PostgreSQL part ways, named for what they do. Code outside
``afi/storage`` asks it and never tests which engine it has; a part with whole modules per engine
(the fabric's ``vectors``/``pg_vectors``, the ledger's message index) picks its module once, when it
opens the store, with :meth:`Engine.choose`. :mod:`.sqlite_engine` and :mod:`.pg_engine` are the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from .migrations import Applied

__all__ = ["Engine"]

T = TypeVar("T")


class Engine(Protocol):
    """The engine-specific part of a store."""

    # errors a statement raises when the store (not the request) failed
    store_errors: tuple[type[Exception], ...]
    # True when a write transaction locks the whole store (SQLite's file lock), so long work (a file's
    # bytes going to disk) runs outside it; False when writers lock only the rows they touch
    one_writer_at_a_time: bool
    # the clause that locks a row read in a write transaction ("" when the transaction holds the store)
    lock_row: str

    # the SQL of a note row's Markdown (SQLite stores it; PostgreSQL puts its front matter and content together)
    note_rendering: str
    # the SQL of that Markdown's length in bytes
    note_rendering_bytes: str
    # True when a note row keeps its front matter (``front``) and SQL adds the content back; False when
    # it keeps its whole rendering (``rendered``)
    note_keeps_front: bool
    # SQLite's unary ``+`` before a column keeps the planner on the rowid, not the scope's index, when
    # rows are looked up by rowid ("" on PostgreSQL, whose planner needs no hint and has no unary + on text)
    rowid_hint: str

    def among(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """The condition that ``column`` is one of ``values``, and its parameters (SQLite: a list of
        placeholders; PostgreSQL: ``= ANY`` of one array, which it parses and plans faster)."""
        ...

    def applied_steps(self, conn: Any) -> list[Applied]:
        """The migration steps the store records, in order (``conn``: one of its connections)."""
        ...

    def table_columns(self, conn: Any, table: str) -> list[str]:
        """The columns a row of ``table`` stores, in order (columns the engine generates, and a SQLite
        table's implicit ``rowid``, left out)."""
        ...

    def choose(self, *, sqlite: T, postgresql: T) -> T:
        """Given a part's two per-engine implementations, return this engine's (once, at open)."""
        ...

    def release(self, database: Any) -> None:
        """Let go of what this thread holds of the store (SQLite: its connection; PostgreSQL: nothing,
        the pool is the process's)."""
        ...

    def lock_space(self, conn: Any, key: int, space: str) -> None:
        """Inside a write transaction, take the lock ``key`` of ``space`` to its end (SQLite: the
        transaction's file lock is it already; PostgreSQL: an advisory lock)."""
        ...

    def lock_scope(self, conn: Any, key: int) -> None:
        """Inside a write transaction, take the advisory lock ``key`` to its end (nothing on SQLite)."""
        ...

    def prune_receipts(self, conn: Any, before: float) -> None:
        """Drop the idempotency receipts started before ``before``, never waiting on a row another
        claim holds."""
        ...

    def guard_blob(self, conn: Any) -> None:
        """Inside a write that names a file blob it does not insert: keep ``afi gc`` from dropping
        that blob until the write commits."""
        ...

    def hold_blobs(self, conn: Any) -> None:
        """Inside ``afi gc``'s transaction, before it drops unnamed blobs: wait for writers mid-way,
        and make new ones wait (nothing on SQLite, whose write lock is the file's)."""
        ...

    def new_seqs(self, conn: Any, table: str, column: str, count: int) -> list[int]:
        """Inside a write transaction, return ``count`` new values of ``table.column``'s identity,
        ascending, for rows about to be inserted with them."""
        ...

    def workspace_candidates(self, space: str, literal: str) -> tuple[str, list[Any]]:
        """The query (and its arguments) giving (rowid, path) of the workspace files of ``space``
        that may hold ``literal`` in any case (three characters or more)."""
        ...

    def json_texts(self, column: str, key: str) -> str:
        """A FROM item giving, one row each as ``value``, the texts of the array ``key`` of the JSON
        object in ``column``."""
        ...

    def same_name(self, a: str, b: str) -> str:
        """The condition that notes ``a`` and ``b`` (aliases) have the same name, as the engine's
        index of names is asked."""
        ...
