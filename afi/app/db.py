"""The store file's schema for ``afi db status`` and ``afi db migrate`` (no provider is opened)."""

from __future__ import annotations

from pathlib import Path

from afi.sqlite import Connections
from afi.storage import Applied, SchemaStatus, file_version, migrate, schema_status
from afi.storage.database import is_postgres_url
from afi.storage.postgres_schema import migrate_postgres
from afi.storage.postgres_status import postgres_status

__all__ = ["Applied", "SchemaStatus", "migrate_store", "store_status"]


def store_status(db: Path | str) -> SchemaStatus:
    """Given the store (a file or a PostgreSQL URL), return its schema version, pending steps and
    tables (nothing is changed)."""
    if isinstance(db, str) and is_postgres_url(db):
        return postgres_status(db)
    return schema_status(Path(db))


def migrate_store(db: Path | str) -> tuple[int, list[Applied]]:
    """Given the store, apply its pending migration steps; return the version before and the steps applied.

    Raises:
        Unsupported: the store was migrated by a newer afi-memory (nothing is changed).
    """
    if isinstance(db, str) and is_postgres_url(db):
        return migrate_postgres(db)
    connections = Connections(db)
    try:
        conn = connections.get()
        before = file_version(conn)
        return before, migrate(conn)
    finally:
        connections.close()
