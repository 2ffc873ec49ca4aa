"""The audit log: one row per write verb through the provider (who, where, what, how it ended).

Rows accumulate for as long as the store lives; ``afi audit prune --older-than DAYS`` drops old ones.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from ..model import rfc3339
from ..provider import Caller
from ..storage.database import Database

__all__ = ["AuditLog"]

_COLUMNS = ("at", "principal", "space", "verb", "path", "result")


class AuditLog:
    """Given the store (see :func:`afi.storage.database.open_database`), record and read rows (table ``audit``,
    see :mod:`afi.storage.schema` and :mod:`afi.storage.postgres_schema`)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def record(self, caller: Caller, verb: str, path: str, result: str) -> None:
        """Record one write verb; the path as the caller sent it (a lone surrogate kept as ``\\ud800``)."""
        # a lone surrogate kept as \ud800 and a NUL as \x00: the row is text on either engine
        shown = path.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO audit(at, principal, space, verb, path, result) VALUES (?,?,?,?,?,?)",
                (rfc3339(datetime.now(UTC)), caller.principal, caller.space, verb, shown, result),
            )

    def recent(self, *, limit: int = 100, space: str | None = None) -> list[dict[str, Any]]:
        """The most recent rows, newest first (with ``space``, only that space's)."""
        where, args = ("WHERE space = ? ", (space, limit)) if space is not None else ("", (limit,))
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM audit {where}ORDER BY seq DESC LIMIT ?", args
            ).fetchall()
        return [dict(zip(_COLUMNS, row, strict=True)) for row in rows]

    def prune(self, older_than: timedelta, *, now: datetime | None = None) -> int:
        """Delete the rows older than ``older_than``; return how many went.

        Raises:
            ValueError: a negative age.
        """
        if older_than < timedelta(0):
            raise ValueError("the age to prune must not be negative")
        cutoff = rfc3339((now or datetime.now(UTC)) - older_than)  # RFC 3339 UTC text sorts as time does
        with self._db.transaction() as conn:
            return int(conn.execute("DELETE FROM audit WHERE at < ?", (cutoff,)).rowcount)
