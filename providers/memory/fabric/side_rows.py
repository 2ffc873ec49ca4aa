"""A scope's rows beside its notes: the lineage of its source entries and its working blocks' value.

Mixed into :class:`~.store.Store`, whose transactions they run in.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from afi.storage.database import Connection

from .rows import _scope_key, iso_now
from .types import Scope

__all__ = ["ScopeSideRows"]


class ScopeSideRows:
    """Source lineage (``source_lineage``) and the working value (``working``) of a scope."""

    if TYPE_CHECKING:

        def read(self) -> AbstractContextManager[Connection]: ...

        def write(self, scope: Scope | None = None) -> AbstractContextManager[Connection]: ...

    def revoke_source(self, scope: Scope, entry_id: str, status: str) -> None:
        """Record that a session entry was corrected, revoked, forgotten or put on legal hold."""
        with self.write() as conn:
            conn.execute(
                "INSERT INTO source_lineage VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, resource_id, thread_id, entry_id) DO UPDATE SET "
                "status = CASE WHEN source_lineage.status = 'legal_hold' THEN 'legal_hold' ELSE excluded.status END, "
                "changed_at = excluded.changed_at",
                (*_scope_key(scope), entry_id, status, iso_now()),
            )

    def revoked_sources(self, scope: Scope) -> dict[str, str]:
        """Return ``{entry_id: status}`` of the scope's revoked source entries."""
        with self.read() as conn:
            return dict(
                conn.execute(
                    "SELECT entry_id, status FROM source_lineage WHERE tenant_id = ? AND resource_id = ? "
                    "AND thread_id = ?",
                    _scope_key(scope),
                ).fetchall()
            )

    # -- working -----------------------------------------------------------------------

    def get_working(self, scope: Scope) -> tuple[dict[str, Any], int]:
        """Return the scope's working value and version (``{}``, 0 before the first write)."""
        with self.read() as conn:
            row = conn.execute(
                "SELECT value, version FROM working WHERE tenant_id = ? AND resource_id = ? AND thread_id = ?",
                _scope_key(scope),
            ).fetchone()
        if row is None:
            return {}, 0
        value = json.loads(row[0])
        return (value if isinstance(value, dict) else {}), int(row[1])

    def cas_working(self, scope: Scope, value: dict[str, Any], expected_version: int) -> int | None:
        """Write the working value if its version is still ``expected_version``; return the new
        version, or None when another writer got there first (nothing written)."""
        payload = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        with self.write() as conn:
            if expected_version == 0:
                cur = conn.execute(
                    "INSERT INTO working VALUES (?, ?, ?, ?, 1) ON CONFLICT DO NOTHING", (*_scope_key(scope), payload)
                )
            else:
                cur = conn.execute(
                    "UPDATE working SET value = ?, version = version + 1 WHERE tenant_id = ? AND resource_id = ? "
                    "AND thread_id = ? AND version = ?",
                    (payload, *_scope_key(scope), expected_version),
                )
            return expected_version + 1 if cur.rowcount == 1 else None
