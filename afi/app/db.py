"""The store for ``afi db status``, ``afi db migrate`` and ``afi db reembed`` (no provider is opened)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from afi.sqlite import Connections
from afi.storage import Applied, SchemaStatus, file_version, migrate, schema_status
from afi.storage.database import is_postgres_url
from afi.storage.postgres_schema import migrate_postgres
from afi.storage.postgres_status import postgres_status

if TYPE_CHECKING:
    from afi.providers.memory.fabric.embedders import Embedder
    from afi.providers.memory.fabric.reembed import Progress, Reembedded

__all__ = ["Applied", "SchemaStatus", "embedder_named", "migrate_store", "reembed_store", "store_status"]


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


def embedder_named(name: str) -> Embedder:
    """Given an embedder's name as the command line gives it (``hash``, ``minilm``, or the name a store
    records, such as ``hash-fnv1a-384``), return that embedder.

    Raises:
        MemoryValidationError: a name no embedder answers to (nothing is written).
    """
    from afi.providers.memory.fabric.choice import embedder_named as named

    return named(name)


def reembed_store(db: Path | str, embedder: Embedder, *, batch: int = 256,
                  progress: Progress | None = None) -> Reembedded:  # fmt: skip
    """Given the store and an embedder, move the store's note vectors over to it, resuming a run stopped
    before (:mod:`afi.providers.memory.fabric.reembed`); return what was done.

    Raises:
        InvalidPath: no store at that path.
    """
    from afi.errors import InvalidPath
    from afi.providers.memory.fabric import reembed
    from afi.storage.database import open_database

    if not is_postgres_url(db) and not Path(db).is_file():
        raise InvalidPath("no store here", path=str(db))
    return reembed.reembed_store(open_database(db), embedder, batch=batch, progress=progress)
