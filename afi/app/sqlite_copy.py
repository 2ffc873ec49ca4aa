"""``afi db copy`` into and out of a SQLite file: rows upserted as they come, embeddings as packed bytes."""

from __future__ import annotations

from typing import Any

from afi.providers.memory.fabric.vector_bytes import pack_vector
from afi.storage.database import Connection, Database
from afi.storage.pg_vector_form import VectorForm

from .copy_rows import VECTOR_COLUMN, TableCopy, upsert

__all__ = ["SqliteCopy"]


class SqliteCopy:
    """A SQLite store as a copy's source or destination."""

    rebuilds_indexes = False

    def prepare(self, dst: Database) -> None:
        """Nothing to set aside: the FTS5 tables follow the rows through their triggers."""

    def vector_form(self, dst: Database) -> VectorForm:
        return "halfvec"

    def to_engine(self, value: Any, column: str, form: VectorForm) -> Any:
        """A value as SQLite keeps it (an embedding read from PostgreSQL as packed half-precision bytes)."""
        if isinstance(value, memoryview):
            value = bytes(value)
        if column == VECTOR_COLUMN and hasattr(value, "to_numpy"):
            return pack_vector(value.to_numpy())
        return value

    def insert(self, conn: Connection, spec: TableCopy, columns: list[str], rows: list[tuple[Any, ...]],
               form: VectorForm) -> None:  # fmt: skip
        upsert(conn, spec, columns, rows, lambda v, c: self.to_engine(v, c, form))

    def finish(self, dst: Database, issued: dict[str, int]) -> None:
        """Nothing to rebuild: AUTOINCREMENT goes on from the rows copied."""

    def issued(self, src: Database) -> dict[str, int]:
        """The highest number each AUTOINCREMENT table has given out (rows deleted since included)."""
        with src.read() as conn:
            return {str(name): int(seq) for name, seq in conn.execute("SELECT name, seq FROM sqlite_sequence")}
