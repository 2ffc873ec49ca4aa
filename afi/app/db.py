"""The store file's schema for ``afi db status`` and ``afi db migrate`` (no provider is opened)."""

from __future__ import annotations

from pathlib import Path

from afi.sqlite import Connections
from afi.storage import Applied, SchemaStatus, file_version, migrate, schema_status

__all__ = ["Applied", "SchemaStatus", "migrate_store", "store_status"]


def store_status(db: Path) -> SchemaStatus:
    """Given the store file, return its schema version, pending steps and tables (nothing is changed)."""
    return schema_status(db)


def migrate_store(db: Path) -> tuple[int, list[Applied]]:
    """Given the store file, apply its pending migration steps; return the version before and the steps applied.

    Raises:
        Unsupported: the file was migrated by a newer afi-memory (nothing is changed).
    """
    connections = Connections(db)
    try:
        conn = connections.get()
        before = file_version(conn)
        return before, migrate(conn)
    finally:
        connections.close()
