"""A scope's change log (``note_changes``): how far it has come, what changed since a seq, and what a
sync reads of it (each change's origin, the versions whose last change is a forget).

Mixed into :class:`~.store.Store`, whose connections they read through.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from afi.storage.database import Connection

from .rows import _scope_key
from .types import Scope

__all__ = ["NoteChanges"]


class NoteChanges:
    """Reads of the change log; its rows are written by the store's note writes (``Store._bump``)."""

    if TYPE_CHECKING:

        def read(self) -> AbstractContextManager[Connection]: ...

    def change_seq(self, scope: Scope) -> int:
        """Return the latest change seq of the scope (0 before any change)."""
        with self.read() as conn:
            row = conn.execute(
                "SELECT MAX(seq) FROM note_changes WHERE tenant_id = ? AND resource_id = ? AND thread_id = ?",
                _scope_key(scope),
            ).fetchone()
        return int(row[0] or 0)

    def sync_changes(self, scope: Scope, seq: int, limit: int) -> list[tuple[int, str, str, str | None]]:
        """Return ``(seq, note_id, op, origin)`` of at most ``limit`` of the scope's changes after ``seq``,
        oldest first (what a sync sends a peer)."""
        with self.read() as conn:
            rows = conn.execute(
                "SELECT seq, note_id, op, origin FROM note_changes WHERE tenant_id = ? AND resource_id = ? "
                f"AND thread_id = ? AND seq > ? ORDER BY seq LIMIT {int(limit)}",
                (*_scope_key(scope), seq),
            ).fetchall()
        return [(int(s), str(n), str(o), origin) for s, n, o, origin in rows]

    def forgotten(self, scope: Scope, note_ids: Sequence[str]) -> set[str]:
        """Return those of the ids whose last change in the scope is a forget (``delete``)."""
        if not note_ids:
            return set()
        marks = ", ".join("?" * len(note_ids))
        with self.read() as conn:
            rows = conn.execute(
                "SELECT c.note_id, c.op FROM note_changes c WHERE c.tenant_id = ? AND c.resource_id = ? "
                f"AND c.thread_id = ? AND c.note_id IN ({marks}) AND c.seq = (SELECT MAX(d.seq) FROM note_changes d "
                "WHERE d.tenant_id = c.tenant_id AND d.resource_id = c.resource_id AND d.thread_id = c.thread_id "
                "AND d.note_id = c.note_id)",
                (*_scope_key(scope), *note_ids),
            ).fetchall()
        return {str(note_id) for note_id, op in rows if op == "delete"}

    def changes_since(self, scope: Scope, seq: int) -> list[tuple[int, str, str]]:
        """Return ``(seq, note_id, op)`` of the scope's changes after ``seq``, oldest first."""
        with self.read() as conn:
            return conn.execute(
                "SELECT seq, note_id, op FROM note_changes WHERE tenant_id = ? AND resource_id = ? "
                "AND thread_id = ? AND seq > ? ORDER BY seq",
                (*_scope_key(scope), seq),
            ).fetchall()
