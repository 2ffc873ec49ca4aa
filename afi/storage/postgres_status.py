"""What ``afi db status`` shows for a PostgreSQL store: its schema version, pending steps, tables."""

from __future__ import annotations

from .postgres import pg_connect, redact_url
from .postgres_schema import applied_pg_steps, pg_version
from .status import SchemaStatus, TableRows
from .steps import LATEST, STEPS

__all__ = ["postgres_status"]

_TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema() ORDER BY c.relname
"""


def postgres_status(url: str) -> SchemaStatus:
    """Given a PostgreSQL URL, return the store's status (a database afi-memory never opened is
    version 0 with every step pending; nothing is changed)."""
    with pg_connect(url) as conn:
        version = pg_version(conn)
        tables = []
        for (name,) in conn.execute(_TABLES).fetchall():
            count = conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()
            tables.append(TableRows(str(name), "table", int(count[0]) if count else 0))
        return SchemaStatus(
            redact_url(url),
            version > 0,
            version,
            LATEST,
            applied=applied_pg_steps(conn),
            pending=[(s.number, s.name) for s in STEPS if s.number > version],
            tables=tables,
        )
