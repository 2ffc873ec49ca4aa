"""Which embedder a store's vectors came from: recorded in ``meta`` by the store's first opener, a store
opened with another refused, and a process left on the old one after ``afi db reembed`` moved the
vectors over refused its vector writes and searches.

Mixed into :class:`~.store.Store`, whose connections and embedder it reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING

from afi.storage.database import Connection

from .choice import short_name
from .errors import MemoryValidationError

if TYPE_CHECKING:
    from .types import Scope

__all__ = ["EmbedderRecord"]

_RECORD = "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO NOTHING"
_EMBEDDER = "SELECT key, value FROM meta WHERE key IN ('embedder', 'dims')"


class EmbedderRecord:
    """The store's record of its embedder, and the checks against it."""

    embedder_name: str
    dims: int

    if TYPE_CHECKING:

        def read(self) -> AbstractContextManager[Connection]: ...
        def write(self, scope: Scope | None = None) -> AbstractContextManager[Connection]: ...

    def _check_embedder(self, name: str, dims: int) -> None:
        """Record the embedder in a new store; refuse a store whose vectors came from another one."""
        with self.read() as conn:
            rows = dict(conn.execute(_EMBEDDER).fetchall())
        if not rows:  # a new store: the first opener records it (a write only this once)
            with self.write() as conn:
                conn.executemany(_RECORD, [("embedder", name), ("dims", str(dims))])
                rows = dict(conn.execute(_EMBEDDER).fetchall())
        if rows.get("embedder") != name or rows.get("dims") != str(dims):
            raise MemoryValidationError(
                f"this store's vectors came from embedder {rows.get('embedder')!r} ({rows.get('dims')} dims); it "
                f"cannot be opened with {name!r} ({dims} dims): name no embedder (no --embedder, no AFI_EMBEDDER) "
                f"to open it with its own, or move its vectors over with `afi db reembed --embedder "
                f"{short_name(name)}`"
            )

    def check_vectors(self, conn: Connection | None = None) -> None:
        """Refuse to go on when the store's vectors now come from another embedder than the one this
        store was opened with (``afi db reembed`` moved them over while this process had it open): a
        search would compare vectors of two models, a write would mix them.

        Raises MemoryValidationError naming both embedders.
        """
        if conn is None:
            with self.read() as conn:
                rows = dict(conn.execute(_EMBEDDER).fetchall())
        else:
            rows = dict(conn.execute(_EMBEDDER).fetchall())
            if not rows:  # recorded when this store opened, in a transaction that was then rolled back
                conn.executemany(_RECORD, [("embedder", self.embedder_name), ("dims", str(self.dims))])
                rows = dict(conn.execute(_EMBEDDER).fetchall())
        if not rows:  # nothing recorded yet, so nothing moved: the next vector written records it
            return
        if rows.get("embedder") != self.embedder_name or rows.get("dims") != str(self.dims):
            raise MemoryValidationError(
                f"this store's vectors were moved over to embedder {rows.get('embedder')!r} ({rows.get('dims')} "
                f"dims) by `afi db reembed` while this process had it open with {self.embedder_name!r} "
                f"({self.dims} dims): restart it with {rows.get('embedder')!r}"
            )

    @contextmanager
    def _vector_write(self, conn: Connection, vector: bool) -> Iterator[None]:
        """Around a statement that writes a note's vector: check the embedder before it (so a process
        left on the old one gets the refusal, not the engine's error over a vector of another form or
        size) and after it (on PostgreSQL a swap holds the notes table until it commits, so a write
        that waited for it reads the new embedder then, and its transaction rolls back)."""
        if vector:
            self.check_vectors(conn)
        yield
        if vector:
            self.check_vectors(conn)
