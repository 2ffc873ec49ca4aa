"""The store's side of vectors made after the write: the notes still without one, and each one filled.

In a store of a sentence embedder a note commits with its words indexed and its vector NULL
(:data:`LATER`); :mod:`.trailing` embeds it afterwards and fills it in here. A fill writes the vector
only onto the version it was made from (same ``seq``, still NULL), so an edit meanwhile is never given
its old text's vector, and logs it in ``vector_fills``: a process holding a scope's vectors in memory
(:class:`~.vectors.VectorIndex`) reads the fills after the one it last saw. The log keeps its last
``FILLS_KEPT`` rows; a reader further behind than that loads the scope again.

Mixed into :class:`~.store.Store`, whose connections and vector form it uses.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from afi.storage.database import Connection

from .rows import _SELECT, NOTE_COLUMNS, _scope_key, note_from_row
from .types import MemoryNote, Scope

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from afi.storage.database import Database

__all__ = ["FILLS_KEPT", "LATER", "Later", "VectorBacklog"]

FILLS_KEPT = 10_000
_SCOPE = "tenant_id = ? AND resource_id = ? AND thread_id = ?"
_RETURNING = "RETURNING tenant_id, resource_id, thread_id, id"
_FILL = f"UPDATE notes SET embedding = ? WHERE rowid = ? AND seq = ? AND embedding IS NULL {_RETURNING}"
_FILL_UNLESS_HELD = (
    "UPDATE notes SET embedding = ? WHERE rowid = (SELECT rowid FROM notes WHERE rowid = ? AND seq = ? "
    f"AND embedding IS NULL FOR UPDATE SKIP LOCKED) {_RETURNING}"
)
_PRUNE = "DELETE FROM vector_fills WHERE fill <= ?"
_PRUNE_UNLESS_HELD = (
    "DELETE FROM vector_fills WHERE fill IN (SELECT fill FROM vector_fills WHERE fill <= ? FOR UPDATE SKIP LOCKED)"
)
_BRIEF_WAIT_MS = 100


class Later:
    """The vector of a note written now and embedded after its write (stored as NULL meanwhile)."""

    def __repr__(self) -> str:
        return "LATER"


LATER = Later()


class VectorBacklog:
    """Reads and fills of the notes whose vectors are still to be made."""

    if TYPE_CHECKING:

        def read(self) -> AbstractContextManager[Connection]: ...
        def write(self, scope: Scope | None = None) -> AbstractContextManager[Connection]: ...
        def check_vectors(self, conn: Connection | None = None) -> None: ...
        def _vector(self, embedding: npt.NDArray[np.float32] | bytes) -> Any: ...

        database: Database

    def without_vectors(self, scope: Scope | None = None, *, limit: int,
                        after: int = 0) -> list[tuple[int, int, MemoryNote]]:  # fmt: skip
        """Return ``(rowid, seq, note)`` of at most ``limit`` notes without a vector after rowid ``after``
        (of one scope, or of every scope), oldest first."""
        where = f"embedding IS NULL AND rowid > ? {'AND ' + _SCOPE if scope else ''}"
        params = (after, *_scope_key(scope)) if scope else (after,)
        sql = (
            f"SELECT {_SELECT}, tenant_id, resource_id, thread_id FROM notes WHERE {where} "
            f"ORDER BY rowid LIMIT {int(limit)}"
        )
        with self.read() as conn:
            rows = conn.execute(sql, params).fetchall()
        width = 2 + len(NOTE_COLUMNS)
        return [(int(row[0]), int(row[1]), note_from_row(row[:width], _scope_of(row[width:]))) for row in rows]

    def count_without_vectors(self, scope: Scope) -> int:
        """Return how many of the scope's notes have no vector yet."""
        with self.read() as conn:
            row = conn.execute(f"SELECT COUNT(*) FROM notes WHERE embedding IS NULL AND {_SCOPE}",
                               _scope_key(scope)).fetchone()  # fmt: skip
        return int(row[0])

    def fill_vectors(self, filled: Sequence[tuple[int, int, npt.NDArray[np.float32]]], *, wait: bool = True) -> int:
        """Given ``(rowid, seq, vector)`` of notes embedded after their write, store each vector on its
        row when the row is still that version without a vector, in one transaction; return how many
        were stored. A fill never waits for a row a writer holds (PostgreSQL: it passes it over, so a
        fill and a write never deadlock); ``wait=False``: nor, on SQLite, for long for the store's
        write lock (a recall's: it goes on by the words).

        Raises MemoryValidationError when the store's vectors were moved to another embedder meanwhile.
        """
        if not filled:
            return 0
        engine = self.database.engine
        fill, prune = engine.choose(sqlite=(_FILL, _PRUNE), postgresql=(_FILL_UNLESS_HELD, _PRUNE_UNLESS_HELD))
        # where a write holds the whole store, a recall's fill waits for it only briefly
        with _brief_wait(self, not wait and engine.one_writer_at_a_time), self.write() as conn:
            self.check_vectors(conn)
            logged: list[tuple[Any, ...]] = []
            for rowid, seq, vector in filled:
                row = conn.execute(fill, (self._vector(vector), rowid, seq)).fetchone()
                if row is not None:
                    logged.append(tuple(row))
            if logged:
                conn.executemany(
                    "INSERT INTO vector_fills (tenant_id, resource_id, thread_id, note_id) VALUES (?, ?, ?, ?)",
                    logged,
                )
                newest = int(conn.execute("SELECT MAX(fill) FROM vector_fills").fetchone()[0])
                if newest % 1000 < len(logged):  # now and then, not every batch
                    conn.execute(prune, (newest - FILLS_KEPT,))
        return len(logged)

    def fills_since(self, scope: Scope, fill: int) -> tuple[int, list[str] | None]:
        """Given the last fill a reader saw, return the newest fill and the ids of the scope's notes
        filled since (None when the log no longer reaches back that far: read the scope again)."""
        with self.read() as conn:
            newest, oldest = conn.execute("SELECT MAX(fill), MIN(fill) FROM vector_fills").fetchone()
            if newest is None or int(newest) <= fill:
                return fill if newest is None else int(newest), []
            if int(oldest) > fill + 1:
                return int(newest), None
            rows = conn.execute(
                f"SELECT note_id FROM vector_fills WHERE fill > ? AND fill <= ? AND {_SCOPE}",
                (fill, int(newest), *_scope_key(scope)),
            ).fetchall()
        return int(newest), [str(row[0]) for row in rows]

    def newest_fill(self) -> int:
        """Return the newest fill logged (0 before any)."""
        with self.read() as conn:
            row = conn.execute("SELECT MAX(fill) FROM vector_fills").fetchone()
        return int(row[0] or 0)


@contextmanager
def _brief_wait(store: VectorBacklog, brief: bool) -> Iterator[None]:
    """Around a SQLite write of this thread not already in a transaction: wait at most
    ``_BRIEF_WAIT_MS`` for the store's write lock (``brief``), then the connection's own timeout again."""
    if not brief:
        yield
        return
    if store.database.in_transaction():  # this thread's write holds the lock already: nothing to wait for
        yield
        return
    with store.read() as conn:
        before = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
        conn.execute(f"PRAGMA busy_timeout = {_BRIEF_WAIT_MS}")
        try:
            yield
        finally:
            conn.execute(f"PRAGMA busy_timeout = {before}")


def _scope_of(key: Sequence[Any]) -> Scope:
    return Scope(tenant_id=key[0], resource_id=key[1], thread_id=key[2])
