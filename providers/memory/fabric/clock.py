"""A scope's clock: the time its writes are stamped with and its reads of "now" are taken at.

A writer looks for the version current at its own time. If its clock ran behind the stamps of the
scope's last write (another replica's clock, or a write that waited for the lock with a stamp taken
before), it found a version already retired, and superseded it again: two current versions of one
note. A reader behind them saw the retired version as current, its own write not yet begun. So every
change of a note is stamped with its writer's wall clock or the stamp of the change before, whichever
is later (``rows.INSERT_CHANGE``), and the scope's present is the wall clock or the newest stamp,
whichever is later: a writer takes it holding the scope's write lock, a read of "now" takes it too. A
retired version ends when its successor starts, never later (an end pushed past the clock made the
same fork).

Stamps more than a minute ahead are not followed (a clock that far off is broken). A writer whose clock
runs further behind still finds a version that later ones superseded; it writes after the newest of
them instead (``chain_head``), so the chain does not fork, though its write reads back only when its
clock reaches the newest one's start.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from afi.storage.database import Database

from .rows import NAMED, file_name, iso_now
from .store import Store
from .types import MemoryNote, Scope

__all__ = ["chain_head", "ended_after", "retire_at", "scope_now"]

# a stamp further ahead of the wall clock is not a replica's skew but a bad clock: followed, it would
# date every later write in the future
_MAX_AHEAD = timedelta(seconds=60)
# every change of a note is stamped no earlier than the one before it (rows.INSERT_CHANGE)
_LAST_STAMP = (
    "SELECT stamp FROM note_changes WHERE tenant_id = :t AND resource_id = :r AND thread_id = :h "
    "ORDER BY seq DESC LIMIT 1"
)


# the versions of a name inserted after a given one (a successor is inserted after what it supersedes)
_SUCCESSORS = (
    "SELECT id, supersedes, valid_from, valid_to, created_at FROM notes WHERE tenant_id = ? AND resource_id = ? "
    f"AND thread_id = ? AND kind = ? AND {NAMED} AND status = 'active' AND supersedes IS NOT NULL AND rowid > "
    "(SELECT o.rowid FROM notes o WHERE o.tenant_id = ? AND o.resource_id = ? AND o.thread_id = ? AND o.id = ?) "
    "ORDER BY rowid"
)


def scope_now(database: Database, scope: Scope) -> str:
    """Return the scope's present (ISO 8601, milliseconds); a writer calls it holding the write lock."""
    key = {"t": scope.tenant_id, "r": scope.resource_id, "h": scope.thread_id}
    with database.read() as conn:
        row = conn.execute(_LAST_STAMP, key).fetchone()
    wall = iso_now()
    stamp = str(row[0]) if row is not None and row[0] is not None else None
    return stamp if stamp is not None and wall < stamp <= _later(wall, _MAX_AHEAD) else wall


def _later(stamp: str, delta: timedelta) -> str:
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00")) + delta
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def retire_at(now: str, valid_from: str | None) -> str:
    """A superseded row's ``valid_to``: now, never before the row's ``valid_from`` (None: valid since
    always). A row superseded in the instant it started keeps an empty window (no instant shows it;
    ``/history`` does): its successor starts now, so a write reads back at once, and the scope's clock
    never runs ahead. A row's ``created_at`` is not its start: a bundle may carry any."""
    return now if valid_from is None or now > valid_from else valid_from


def ended_after(valid_to: str | None, updated_at: str | None, at: str, succeeded: bool | None) -> bool:
    """Whether a version's ``valid_to`` was set after the instant ``at``, so that it was not known then.

    ``succeeded`` says whether a successor retired the version: True when one written after ``at``
    did, False when one written by ``at`` did, None when none did. Without one, a version retired in
    place (a restore) had its window cut when its row was last updated (:func:`retire_at`: now, or a
    millisecond later in stores written before it). An end written with the version lies after
    its updates (an update reaches only a version still valid), so it stays."""
    if valid_to is None or valid_to <= at or succeeded is False:
        return False
    if succeeded:
        return True
    return updated_at is not None and updated_at > at and valid_to <= _later(updated_at, timedelta(milliseconds=1))


def chain_head(store: Store, scope: Scope, note: MemoryNote) -> MemoryNote:
    """The newest version descending from ``note`` by retirement (the note itself when none does): a
    version a write found current at its own time may be retired at the scope's present.

    A successor counts when it starts where its predecessor ends, and started when it was written, or
    its predecessor's window is empty (a writer behind retired it at its start). A version scheduled
    for later, written with its own ``valid_from``, is not one: it stays as its writer set it."""
    if note.valid_to is None or note.name is None:  # never retired: nothing descends from it
        return note
    with store.read() as conn:
        key = (scope.tenant_id, scope.resource_id, scope.thread_id)
        rows = conn.execute(_SUCCESSORS, (*key, note.kind, file_name(note.name), *key, note.id))
        successors: dict[str, tuple[str, str | None, str | None, str]] = {}
        for version_id, supersedes, valid_from, valid_to, created_at in rows.fetchall():
            successors[str(supersedes)] = (str(version_id), valid_from, valid_to, str(created_at))  # the last wins
    head_id, seen = note.id, {note.id}
    starts: str | None = note.valid_from
    ends: str | None = note.valid_to
    while ends is not None and head_id in successors:
        next_id, next_starts, next_ends, written = successors[head_id]
        retired = next_starts == ends and next_starts is not None and (next_starts <= written or starts == ends)
        if not retired or next_id in seen:
            break
        head_id, starts, ends = next_id, next_starts, next_ends
        seen.add(head_id)
    if head_id == note.id:
        return note
    found = store.select_notes(scope, "id = ?", (head_id,))
    return found[0] if found else note
