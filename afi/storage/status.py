"""What ``afi db status`` shows: the file's schema version, the steps pending, each table's row count."""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .migrations import Applied, applied_steps, file_version
from .steps import LATEST, STEPS

if TYPE_CHECKING:
    import sqlite_utils

__all__ = ["SchemaStatus", "TableRows", "schema_status"]

_FTS5_SHADOWS = ("config", "content", "data", "docsize", "idx")


@dataclass(frozen=True)
class TableRows:
    """One table of the store: its name, ``table`` or the module of a virtual one (``FTS5``), its rows."""

    name: str
    kind: str
    rows: int


@dataclass(frozen=True)
class SchemaStatus:
    """The schema of one store file as found (nothing is changed to find it)."""

    path: str
    exists: bool
    version: int
    latest: int
    applied: list[Applied] = field(default_factory=list)
    pending: list[tuple[int, str]] = field(default_factory=list)
    tables: list[TableRows] = field(default_factory=list)

    @property
    def newer(self) -> bool:
        """True when a newer afi-memory migrated the file (this one refuses to open it)."""
        return self.version > self.latest

    def as_json(self) -> dict[str, Any]:
        """The status as JSON-able values (``afi db status --json``)."""
        return {
            "path": self.path,
            "exists": self.exists,
            "version": self.version,
            "latest": self.latest,
            "newer": self.newer,
            "applied": [asdict(step) for step in self.applied],
            "pending": [{"number": number, "name": name} for number, name in self.pending],
            "tables": [asdict(table) for table in self.tables],
        }


def schema_status(path: Path) -> SchemaStatus:
    """Given a store file, return its status; a missing file is reported as version 0, not created."""
    if not path.exists():
        return SchemaStatus(str(path), False, 0, LATEST, pending=[(s.number, s.name) for s in STEPS])
    import sqlite_utils  # here, not at the top: it loads numpy, which no command but this one needs to open a store

    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        version = file_version(conn)
        return SchemaStatus(
            str(path),
            True,
            version,
            LATEST,
            applied=applied_steps(conn),
            pending=[(s.number, s.name) for s in STEPS if s.number > version],
            tables=_tables(sqlite_utils.Database(conn)),
        )
    finally:
        conn.close()


def _tables(db: sqlite_utils.Database) -> list[TableRows]:
    """Every table with its row count, leaving out SQLite's own and the FTS5 tables' shadow tables."""
    tables = [table for table in db.tables if not table.name.startswith("sqlite_")]
    virtual = {table.name: table.virtual_table_using for table in tables if table.virtual_table_using}
    shadows = {f"{name}_{suffix}" for name in virtual for suffix in _FTS5_SHADOWS}
    return [
        TableRows(table.name, virtual.get(table.name) or "table", table.count)
        for table in sorted(tables, key=lambda t: t.name)
        if table.name not in shadows
    ]
