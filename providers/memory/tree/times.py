"""The time a folder of the fixed tree shows: when its space last changed, not 1970.

The top-level folders (and ``/`` itself) hold no time of their own. They show the time of the space's
last successful write, read from the audit log (one indexed row; every write verb of every door
records one), or, before any write, when the store was made (its first migration).
"""

from __future__ import annotations

from datetime import datetime

from afi.model import rfc3339
from afi.storage.database import Database
from afi.storage.migrations import VERSION_TABLE

__all__ = ["SpaceClock"]


class SpaceClock:
    """One space's folder time, read from the store on each ask (any process may have written)."""

    def __init__(self, database: Database, space: str) -> None:
        self._db = database
        self.space = space

    def changed_at(self) -> str | None:
        """The RFC 3339 time of the space's last write, else of the store's making; None if neither is known."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT at FROM audit WHERE space = ? AND result = 'ok' ORDER BY seq DESC LIMIT 1", (self.space,)
            ).fetchone()
            if row is None:
                row = conn.execute(f"SELECT MIN(applied_at) FROM {VERSION_TABLE}").fetchone()
        if row is None or row[0] is None:
            return None
        return rfc3339(datetime.fromisoformat(str(row[0]).replace("Z", "+00:00")))
