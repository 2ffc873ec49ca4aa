"""What ``afi db reembed`` (:mod:`.reembed`) does its own way on each engine: the staged vectors' column
type, a vector as the engine keeps it, and the swap of every row's vector.

SQLite keeps a vector as :func:`~.vector_bytes.pack_vector`'s bytes whatever the embedder, and its
final transaction (``BEGIN IMMEDIATE``) holds the whole file. PostgreSQL keeps a ``sparsevec`` or a
``halfvec`` as the embedder calls for (:mod:`afi.storage.pg_vector_form`): the swap holds the notes
table, gives the column the new embedder's form, and builds the HNSW index again for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from afi.storage.database import Connection

__all__ = ["PgVectorSwap", "SqliteVectorSwap", "VectorSwap"]


class SqliteVectorSwap:
    """A SQLite store's side of a swap (see the module)."""

    integer = "INTEGER"
    vector_type = "BLOB"
    # every note row takes its staged vector (``UPDATE … FROM`` needs SQLite 3.33)
    update = (
        "UPDATE notes SET embedding = (SELECT s.embedding FROM {staged} s WHERE s.note_rowid = notes.rowid) "
        "WHERE rowid IN (SELECT note_rowid FROM {staged})"
    )

    def __init__(self, embedder: str, dims: int) -> None:
        self.embedder, self.dims = embedder, dims

    def value(self, vector: npt.NDArray[np.float32]) -> Any:
        """A vector as the notes table keeps it (what the store writes for a note)."""
        from .vector_bytes import pack_vector

        return pack_vector(vector)

    def hold_notes(self, conn: Connection) -> None:
        """``BEGIN IMMEDIATE`` holds the file's write lock: no note changes until the swap commits."""

    def clear(self, conn: Connection) -> None:
        """A BLOB column takes any vector: nothing to change before the rows are written."""

    def index(self, conn: Connection) -> None:
        """Each process builds its own matrix of the vectors: no index in the store."""


class PgVectorSwap:
    """A PostgreSQL store's side of a swap (see the module)."""

    integer = "bigint"
    update = "UPDATE notes SET embedding = s.embedding FROM {staged} s WHERE notes.rowid = s.note_rowid"

    def __init__(self, embedder: str, dims: int) -> None:
        from afi.storage.pg_vector_form import wanted_form

        self.embedder, self.dims = embedder, dims
        self.form = wanted_form(embedder, dims)
        self.vector_type: str = self.form

    def value(self, vector: npt.NDArray[np.float32]) -> Any:
        """A vector as the notes table keeps it for this embedder (what the store writes for a note)."""
        from afi.storage.pg_vector_form import column_value

        return column_value(vector, self.form)

    def hold_notes(self, conn: Connection) -> None:
        """Hold the notes table to the end: writers of notes wait, and then see the new embedder in
        ``meta`` (dropping the HNSW index would take this lock anyway; taken first, a writer that has
        read the table finishes before the swap begins instead of the two waiting on each other)."""
        from afi.storage.pg_vector_form import hold_vectors

        hold_vectors(conn)

    def clear(self, conn: Connection) -> None:
        """Drop the HNSW index, and give the column the new embedder's form (every row is written next)."""
        from afi.storage.pg_vector_form import replace_vector_column

        replace_vector_column(conn, self.form, self.dims)

    def index(self, conn: Connection) -> None:
        """Build the HNSW index over the new vectors, for their form and size."""
        from afi.storage.pg_vector_form import create_hnsw

        conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
        create_hnsw(conn, self.form, self.dims)


VectorSwap = SqliteVectorSwap | PgVectorSwap
