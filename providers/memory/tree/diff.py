"""What changed in a space's notes between two instants (or snapshots): added, changed, retired.

Each side is the tree ``/.afi/at/<instant>/`` shows (:mod:`.at`): the version of each fact and
procedure name valid and written at that instant. A name present only later was added; on both sides
with another version, changed; present only earlier, retired (its validity ended, or it was renamed
away). A forgotten note, or one under legal hold, is gone from every instant (forgetting erases; a
hold keeps it for the auditors, not for recall), so no diff lists it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from afi.errors import InvalidPath

from ..fabric.types import MemoryNote
from .at import AT_AREAS, resolve_instant
from .diff_files import FilesDiff, diff_files
from .locate import note_path

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["Change", "NotesDiff", "belief", "diff_notes"]

_PAGE = 1000


@dataclass(frozen=True)
class Change:
    path: str
    before: str | None  # the version's id at the first instant
    after: str | None  # at the second


@dataclass
class NotesDiff:
    since: str
    until: str
    added: list[Change] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    retired: list[Change] = field(default_factory=list)
    files: FilesDiff = field(default_factory=FilesDiff)  # the workspace files (:mod:`.diff_files`)


def belief(note: MemoryNote) -> dict[str, Any]:
    """What a version says: its text and annotations (two versions saying the same are no change,
    whatever their ids; a restore writes such a version)."""
    return note.model_dump(include=_SAID)


_SAID = {"kind", "name", "content", "t_ref", "tags", "keywords", "context", "importance", "links",
         "source_entry_ids", "consent"}  # fmt: skip


def _says_else(space: Space, before: str, after: str) -> bool:
    old, new = space.fabric.get(before), space.fabric.get(after)
    return old is None or new is None or belief(old) != belief(new)


def _tree(space: Space, at: str) -> dict[str, str]:
    """Path → version id of every fact and procedure of the tree at ``at``."""
    found: dict[str, str] = {}
    for kind in (k for k in AT_AREAS.values() if k is not None):
        after: str | None = None
        while True:
            rows = space.notes.list_current(kind, after=after, glob=None, limit=_PAGE, at=at)
            for row in rows:
                found[note_path(kind, row.name or row.id)] = row.id
            if len(rows) < _PAGE:
                break
            after = f"{rows[-1].name or rows[-1].id}.md"
    return found


def diff_notes(space: Space, since: str, until: str) -> NotesDiff:
    """Given two instants (ISO 8601, a snapshot's name, or ``now``), return what changed between them."""
    if not since or not until:
        raise InvalidPath("name two instants (ISO 8601, a snapshot's name, or now)")
    present = space.fabric.memory.present()
    start = present if since == "now" else resolve_instant(since, f"/.afi/at/{since}", space)
    end = present if until == "now" else resolve_instant(until, f"/.afi/at/{until}", space)
    before, after = _tree(space, start), _tree(space, end)
    out = NotesDiff(start, end)
    for path in sorted(before.keys() | after.keys()):
        was, now = before.get(path), after.get(path)
        if was is None:
            out.added.append(Change(path, None, now))
        elif now is None:
            out.retired.append(Change(path, was, None))
        elif was != now and _says_else(space, was, now):
            out.changed.append(Change(path, was, now))
    out.files = diff_files(space, start, end)
    return out
