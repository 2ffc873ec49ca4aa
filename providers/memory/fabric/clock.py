"""A scope's clock: the time its writes are stamped with and its reads of "now" are taken at.

A writer looks for the version current at its own time. If its clock ran behind the stamps of the
scope's last write (another replica's clock, or a write that waited for the lock with a stamp taken
before), it found a version already retired, and superseded it again: two current versions of one
note. A reader behind them saw the retired version as current, its own write not yet begun. So the
scope's present is the wall clock or the latest stamp of its last changed notes, whichever is later:
a writer takes it holding the scope's write lock, a read of "now" takes it too. A retired version ends
when its successor starts, never later (an end pushed past the clock made the same fork).

Stamps more than a minute ahead are not followed (a bundle may carry any time). A writer whose clock
runs further behind still finds a version that later ones superseded; it writes after the newest of
them instead (``chain_head``), so the chain does not fork, though its write reads back only when its
clock reaches the newest one's start.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from afi.storage.database import Database

from .rows import iso_now
from .store import Store
from .types import MemoryNote, Scope

__all__ = ["chain_head", "retire_at", "scope_now"]

# the last few notes changed that still exist (a deleted one leaves no stamp): a write that retires one
# version and adds another changes two, a write with workers a few more
_RECENT = 8
# a stamp further ahead of the wall clock is not a replica's skew but a bad time (a bundle's, say):
# followed, it would date every later write in the future
_MAX_AHEAD = timedelta(seconds=60)
_STAMPS = (
    "SELECT n.created_at, n.updated_at FROM note_changes c JOIN notes n ON n.tenant_id = c.tenant_id "
    "AND n.resource_id = c.resource_id AND n.thread_id = c.thread_id AND n.id = c.note_id "
    f"WHERE c.tenant_id = :t AND c.resource_id = :r AND c.thread_id = :h ORDER BY c.seq DESC LIMIT {_RECENT}"
)


def scope_now(database: Database, scope: Scope) -> str:
    """Return the scope's present (ISO 8601, milliseconds); a writer calls it holding the write lock."""
    key = {"t": scope.tenant_id, "r": scope.resource_id, "h": scope.thread_id}
    with database.read() as conn:
        rows = conn.execute(_STAMPS, key).fetchall()
    wall = iso_now()
    bound = _later(wall, _MAX_AHEAD)
    return max([wall, *(str(stamp) for row in rows for stamp in row if stamp and str(stamp) <= bound)])


def _later(stamp: str, delta: timedelta) -> str:
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00")) + delta
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def retire_at(now: str, valid_from: str | None) -> str:
    """A superseded row's ``valid_to``: now, never before the row's ``valid_from`` (None: valid since
    always). A row superseded in the instant it started keeps an empty window (no instant shows it;
    ``/history`` does): its successor starts now, so a write reads back at once, and the scope's clock
    never runs ahead. A row's ``created_at`` is not its start: a bundle may carry any."""
    return now if valid_from is None or now > valid_from else valid_from


def chain_head(store: Store, scope: Scope, note: MemoryNote) -> MemoryNote:
    """The newest version descending from ``note`` through ``supersedes`` (the note itself when none
    does): what a write found current at its own time may be superseded at the scope's."""
    if note.valid_to is None or note.name is None:  # never retired: nothing supersedes it
        return note
    versions = store.select_notes(scope, "kind = ? AND name = ? AND status = 'active'", (note.kind, note.name),
                                  order="seq")  # fmt: skip
    successor = {version.supersedes: version for version in versions if version.supersedes}
    head, seen = note, {note.id}
    while head.id in successor and successor[head.id].id not in seen:
        head = successor[head.id]
        seen.add(head.id)
    return head
