"""The store file's storage layer, shared by the auth door and the providers.

- :mod:`.migrations`: the runner (numbered steps, the ``schema_version`` table, refusing a file a
  newer afi-memory migrated);
- :mod:`.steps`: the one numbered list of steps, each with its SQLite form (:mod:`.schema`) and its
  PostgreSQL form (:mod:`.pg_steps`);
- :mod:`.ensure`: :func:`ensure_schema`, which every part that opens the store calls, and :func:`migrate`;
- :mod:`.status`: what ``afi db status`` shows;
- :mod:`.trigram`: the FTS5 query that finds the rows a literal may be in.
"""

from __future__ import annotations

from .ensure import ensure_schema, migrate
from .migrations import VERSION_TABLE, Applied, Step, applied_steps, file_version
from .status import SchemaStatus, TableRows, schema_status
from .steps import LATEST, STEPS

__all__ = [
    "LATEST",
    "STEPS",
    "VERSION_TABLE",
    "Applied",
    "SchemaStatus",
    "Step",
    "TableRows",
    "applied_steps",
    "ensure_schema",
    "file_version",
    "migrate",
    "schema_status",
]
