"""What the fabric's :class:`~.store.Store` does its own way on SQLite: a note row keeps its whole
rendering, its embedding is :func:`~.vector_bytes.pack_vector`'s bytes, and lexical search reads the
FTS5 table ``notes_lexical`` (:mod:`.lexical`). :mod:`.pg_notes` is PostgreSQL's; the store chooses
one when it opens."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from afi.storage.database import Connection, Database

from .lexical import TermStats, bm25_rowids, fts_query, matching_rowids
from .render import render_note
from .rows import _scope_key
from .types import MemoryNote, Scope

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from afi.storage.pg_vector_form import VectorForm

__all__ = ["SqliteNotes"]


class SqliteNotes:
    """A SQLite store's notes (see the module)."""

    # the column a row keeps the note's Markdown in, and how it is written
    rendering: tuple[str, Callable[[MemoryNote], str]] = ("rendered", render_note)
    lends_thread_connection = True  # one connection per thread: tests and tools may hold it

    def __init__(self, database: Database) -> None:
        self.term_stats = TermStats()

    def settle_vectors(self, write: Callable[[], Any]) -> VectorForm:
        """BLOBs of half-precision components whatever the embedder: nothing to settle."""
        return "halfvec"

    def vector(self, array: npt.NDArray[np.float32], form: VectorForm) -> Any:
        from .vector_bytes import pack_vector  # with numpy, which a store that writes no vector never loads

        return pack_vector(array)

    def vector_of_blob(self, blob: bytes, form: VectorForm) -> Any:
        return blob

    def with_blobs(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        return rows

    def lexical(self, conn: Connection, scope: Scope, terms: list[str], *, valid: str,
                params: Sequence[Any], limit: int) -> list[int]:  # fmt: skip
        match = fts_query(terms)
        if match is None:
            return []
        sql = (
            "SELECT n.rowid FROM notes_lexical JOIN notes n ON n.rowid = notes_lexical.rowid "
            "WHERE notes_lexical MATCH ? AND n.tenant_id = ? AND n.resource_id = ? AND n.thread_id = ? "
            f"AND {valid} ORDER BY bm25(notes_lexical) LIMIT ?"
        )
        return [row[0] for row in conn.execute(sql, (match, *_scope_key(scope), *params, limit)).fetchall()]

    def rank_lexical(self, conn: Connection, scope: Scope, terms: list[str], *,
                     limit: int | None) -> list[int]:  # fmt: skip
        """The FTS5 index read alone, across every scope (recall filters by the vector index's mask)."""
        match = fts_query(terms)
        return [] if match is None else bm25_rowids(conn, match, limit=limit)  # type: ignore[arg-type]

    def every_match(self, conn: Connection, terms: list[str], *, limit: int) -> list[int] | None:
        match = fts_query(terms)
        return None if match is None else matching_rowids(conn, match, limit)  # type: ignore[arg-type]

    def select_terms(self, conn: Connection, terms: list[str], *, seq: int, max_postings: int,
                     min_terms: int) -> list[str]:  # fmt: skip
        return self.term_stats.select(conn, terms, seq=seq, max_postings=max_postings,  # type: ignore[arg-type]
                                      min_terms=min_terms)  # fmt: skip
