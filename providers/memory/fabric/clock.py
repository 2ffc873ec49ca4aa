"""A scope's write clock: when a version is retired, and the time a write is stamped with.

A writer looks for the version current at its own time. If its clock ran behind the stamps of the
scope's last write (another replica's clock, or a write that waited for the lock with a stamp taken
before), it found a version already retired, and superseded it again: two current versions of one
note. So a writer holding the scope's write lock stamps its write with the wall clock or the latest
stamp of the scope's last changed notes, whichever is later; and a retired version ends when its
successor starts, never later (an end pushed past the wall clock made the same fork).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from .rows import iso_now
from .store import Store
from .types import Scope

__all__ = ["retire_at", "write_time"]

# the last few changes: a write that retires one version and adds another changes two notes
_RECENT = 4
# a stamp further ahead of the wall clock is not a replica's skew but a bad time (a bundle's, say):
# followed, it would date every later write in the future, where no read at "now" finds it
_MAX_AHEAD = timedelta(seconds=60)


def write_time(store: Store, scope: Scope) -> str:
    """Return the time to stamp a write with (ISO 8601, milliseconds); call it holding the write lock."""
    sql = (
        "SELECT n.created_at, n.updated_at FROM notes n WHERE n.tenant_id = ? AND n.resource_id = ? "
        "AND n.thread_id = ? AND n.id IN (SELECT c.note_id FROM note_changes c WHERE c.tenant_id = ? "
        f"AND c.resource_id = ? AND c.thread_id = ? ORDER BY c.seq DESC LIMIT {_RECENT})"
    )
    key = (scope.tenant_id, scope.resource_id, scope.thread_id)
    with store.read() as conn:
        rows = conn.execute(sql, (*key, *key)).fetchall()
    wall = iso_now()
    bound = _later(wall, _MAX_AHEAD)
    return max([wall, *(str(stamp) for row in rows for stamp in row if stamp and str(stamp) <= bound)])


def _later(stamp: str, delta: timedelta) -> str:
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00")) + delta
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def retire_at(now: str, started: str) -> str:
    """A superseded row's ``valid_to``: now, never before the row's start. A row superseded in the
    millisecond it started keeps an empty window (no instant shows it; ``/history`` does): its
    successor starts now, so a write reads back at once, and the scope's clock never runs ahead."""
    return now if now > started else started
