"""What the fabric's :class:`~.store.Store` does its own way on PostgreSQL: a note row keeps its front
matter (SQL adds the content back, :mod:`afi.storage.pg_derived_notes`), its embedding is a
``halfvec`` or ``sparsevec`` (:mod:`afi.storage.pg_vector_form`), and lexical search is
:mod:`.pg_lexical`'s BM25. :mod:`.sqlite_notes` is SQLite's; the store chooses one when it opens."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import numpy.typing as npt

from afi.storage.database import Connection, Database
from afi.storage.pg_vector_form import VectorForm, column_value, settle_vector_form

from .pg_lexical import PgTermStats, pg_bm25_rowids
from .render import render_front
from .types import MemoryNote, Scope
from .vector_bytes import pack_vector, unpack_vector

__all__ = ["PgNotes", "latest_seq"]


def latest_seq(conn: Connection) -> int:
    """The store's latest note change (what the BM25 statistics are fresh as of)."""
    return int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM note_changes").fetchone()[0])


class PgNotes:
    """A PostgreSQL store's notes (see the module)."""

    rendering: tuple[str, Callable[[MemoryNote], str]] = ("front", render_front)
    lends_thread_connection = False  # the pool lends a connection by block: read() or write()

    def __init__(self, database: Database) -> None:
        self.term_stats = PgTermStats()

    def settle_vectors(self, write: Callable[[], AbstractContextManager[Connection]]) -> VectorForm:
        """sparsevec for a sparse embedder, halfvec otherwise, chosen once the store knows its embedder."""
        with write() as conn:
            return settle_vector_form(conn)

    def vector(self, array: npt.NDArray[np.float32], form: VectorForm) -> Any:
        return column_value(array, form)

    def vector_of_blob(self, blob: bytes, form: VectorForm) -> Any:
        return column_value(unpack_vector(blob), form)

    def with_blobs(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """The embedding column as SQLite keeps it (:func:`unpack_vector` reads it)."""
        return [(*row[:-1], None if row[-1] is None else pack_vector(row[-1].to_numpy())) for row in rows]

    def lexical(self, conn: Connection, scope: Scope, terms: list[str], *, valid: str,
                params: Sequence[Any], limit: int) -> list[int]:  # fmt: skip
        return pg_bm25_rowids(
            conn, self.term_stats, scope, terms, seq=latest_seq(conn), limit=limit, where=valid, params=params
        )

    def rank_lexical(self, conn: Connection, scope: Scope, terms: list[str], *,
                     limit: int | None) -> list[int]:  # fmt: skip
        """The scope's notes only."""
        return pg_bm25_rowids(conn, self.term_stats, scope, terms, seq=latest_seq(conn), limit=limit)

    def every_match(self, conn: Connection, terms: list[str], *, limit: int) -> list[int] | None:
        """None: the fold asks the HNSW graph instead."""
        return None

    def select_terms(self, conn: Connection, terms: list[str], *, seq: int, max_postings: int,
                     min_terms: int) -> list[str]:  # fmt: skip
        return self.term_stats.select(conn, terms, seq=seq, max_postings=max_postings, min_terms=min_terms)
