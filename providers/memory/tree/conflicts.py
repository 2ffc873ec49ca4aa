"""A space's open conflicts: names a sync found written on both sides, settled, and not answered yet.

A sync settles a name (or a file's path) written on both sides by keeping the version written last
current and linking it to each version it retired (``won_over``, sync/apply.py). Such a conflict is
open while that version is current and one version it won over is still in ``/history``. It closes
when the name gets a new version (any write of it: the fabric makes a new version of a version that
won, whatever its text, and does not carry the links over), when the name or the versions it won
over are forgotten, or when the version retires. Every store that holds the same versions lists the
same conflicts: they are read from the rows, which a sync makes alike on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..fabric.types import WON_OVER, MemoryNote, won_over
from .locate import note_path

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["Loser", "OpenConflict", "open_conflicts"]

_CURRENT = (
    "kind IN ('fact', 'procedure', 'file') AND status = 'active' AND links LIKE ? "
    "AND (valid_from IS NULL OR valid_from <= ?) AND (valid_to IS NULL OR valid_to > ?)"
)


@dataclass(frozen=True)
class Loser:
    """A version the current one won over: where it is kept, and the instant it was retired."""

    id: str
    path: str  # /history/<id>.md
    retired_at: str | None  # its valid_to, set by the settle: the winner's writing time


@dataclass(frozen=True)
class OpenConflict:
    """The current version of a name that won over others in a sync, and those others."""

    kind: str
    name: str  # the note's name, or a file note's workspace path
    path: str  # where the name reads now: /facts/<name>.md, /procedures/<name>.md, /files/<path>
    id: str  # the current version (the winner)
    history: str  # /history/<id>.md: the winner as this version
    settled_at: str | None  # when the latest of its losers was retired
    losers: list[Loser] = field(default_factory=list)


def _where(note: MemoryNote) -> tuple[str, str]:
    """A version's name and the path its name reads at."""
    if note.kind == "file" and note.path is not None:
        return note.path, f"/files/{note.path}"
    name = note.name or note.id
    return name, note_path(note.kind, name)


def open_conflicts(space: Space) -> list[OpenConflict]:
    """Given a space, return its open conflicts, by path."""
    memory = space.fabric.memory
    store, scope, now = memory.store, memory.scope, memory.present()
    winners = [n for n in store.select_notes(scope, _CURRENT, (f"%{WON_OVER}%", now, now)) if won_over(n)]
    wanted = sorted({loser for note in winners for loser in won_over(note)})
    kept: dict[str, MemoryNote] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        for note in store.select_notes(scope, f"status = 'active' AND id IN ({marks})", chunk):
            kept[note.id] = note
    out: list[OpenConflict] = []
    for note in winners:
        losers = [Loser(i, f"/history/{i}.md", kept[i].valid_to) for i in dict.fromkeys(won_over(note)) if i in kept]
        if not losers:
            continue  # every version it won over was forgotten (or dropped by gc): nothing left to compare
        name, path = _where(note)
        settled = max((loser.retired_at for loser in losers if loser.retired_at), default=None)
        out.append(OpenConflict(note.kind, name, path, note.id, f"/history/{note.id}.md", settled, losers))
    return sorted(out, key=lambda c: (c.path, c.id))
