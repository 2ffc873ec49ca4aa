"""``afi db copy`` into and out of a PostgreSQL database: a bulk load with ``COPY``, the full-text,
trigram and HNSW indexes set aside for it and built once at the end, identities moved past the rows."""

from __future__ import annotations

from typing import Any

from afi.providers.memory.fabric.vector_bytes import unpack_vector
from afi.storage.database import Connection, Database
from afi.storage.pg_vector_form import HNSW_PREFIX, VectorForm, column_value, settle_vector_form

from .copy_rows import VECTOR_COLUMN, TableCopy, upsert

__all__ = ["PgCopy"]

# Built once after a PostgreSQL bulk load rather than kept up to date row by row during it.
_DEFERRED_INDEXES = ("notes_lexical", "notes_rendered_folded_trgm", "workspace_files_trgm", "ledger_fts_body")
_DEFERRED_TABLE = "afi_copy_indexes"
# identity columns whose sequence must move past the copied rows
_IDENTITIES = {"afi_keys": "rowid", "afi_ssh_keys": "rowid", "audit": "seq", "notes": "rowid",
               "note_changes": "seq", "workspace_files": "rowid", "ledger_sessions": "key",
               "ledger_entries": "seq", "file_versions": "id"}  # fmt: skip


class PgCopy:
    """A PostgreSQL store as a copy's source or destination."""

    rebuilds_indexes = True  # built once at the end of a copy into it

    def prepare(self, dst: Database) -> None:
        """Drop the destination's full-text, trigram and HNSW indexes for the load, keeping their
        definitions in the destination itself (so a resumed copy still rebuilds them)."""
        with dst.transaction() as conn:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_DEFERRED_TABLE} (name TEXT PRIMARY KEY, definition TEXT NOT NULL)"
            )
            found = conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                "AND (indexname = ANY(?) OR indexname LIKE 'notes\\_embedding\\_hnsw\\_%')",
                (list(_DEFERRED_INDEXES),),
            ).fetchall()
            for name, definition in found:
                conn.execute(
                    f"INSERT INTO {_DEFERRED_TABLE} (name, definition) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                    (name, definition),
                )
                conn.execute(f'DROP INDEX IF EXISTS "{name}"')

    def vector_form(self, dst: Database) -> VectorForm:
        """The copied meta names the embedder: its vectors' form (the HNSW index is built at the end)."""
        with dst.transaction() as conn:
            return settle_vector_form(conn, index=False)

    def to_engine(self, value: Any, column: str, form: VectorForm) -> Any:
        """A value as PostgreSQL keeps it (an embedding read from SQLite as a ``halfvec`` or
        ``sparsevec``, at the same half precision, so exact)."""
        if isinstance(value, memoryview):
            value = bytes(value)
        if column == VECTOR_COLUMN and isinstance(value, bytes):
            return column_value(unpack_vector(value), form)
        return value

    def insert(self, conn: Connection, spec: TableCopy, columns: list[str], rows: list[tuple[Any, ...]],
               form: VectorForm) -> None:  # fmt: skip
        if spec.replace or spec.name == "meta":
            upsert(conn, spec, columns, rows, lambda v, c: self.to_engine(v, c, form))
            return
        # an empty destination (checked) and keys past the last batch: no row can conflict, so COPY
        raw = conn.raw  # type: ignore[attr-defined]  # the PostgreSQL engine's psycopg connection
        with raw.cursor() as cursor, cursor.copy(f"COPY {spec.name} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row([self.to_engine(v, c, form) for v, c in zip(row, columns, strict=True)])

    def finish(self, dst: Database, issued: dict[str, int]) -> None:
        """Build the indexes set aside, gather statistics, move each identity past every number the
        source gave out (not only past the rows left: an AUTOINCREMENT table never reuses a number)."""
        self._rebuild_indexes(dst)
        with dst.read() as conn:  # a bulk load leaves the planner no statistics until autovacuum comes by
            conn.execute("ANALYZE")
        with dst.transaction() as conn:
            for table, column in _IDENTITIES.items():
                conn.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                    f"GREATEST((SELECT MAX({column}) FROM {table}), ?, 1))",
                    (issued.get(table, 0),),
                )

    def issued(self, src: Database) -> dict[str, int]:
        """None to carry over: the identities are moved past the rows at the end of a copy into one."""
        return {}

    @staticmethod
    def _rebuild_indexes(dst: Database) -> None:
        """Build the indexes set aside, and the HNSW index for the embedder the copied ``meta`` names,
        in the form it calls for (so the first replica to open the store does not build it)."""
        with dst.transaction() as conn:
            conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
            for name, definition in conn.execute(f"SELECT name, definition FROM {_DEFERRED_TABLE}").fetchall():
                if str(name).startswith(HNSW_PREFIX):  # made again below, for the form the copied embedder calls for
                    continue
                conn.execute(str(definition).replace("CREATE INDEX", "CREATE INDEX IF NOT EXISTS", 1))
            conn.execute(f"DROP TABLE {_DEFERRED_TABLE}")
            settle_vector_form(conn)
