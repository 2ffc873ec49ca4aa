"""``/.afi/at/<instant>/``: the notes as they stood at an instant, read-only.

``<instant>`` is an ISO 8601 time (``2026-11-30T10:00:00Z``; a date alone is its midnight UTC) or a
snapshot's name (``afi snapshot create``: a name starts with a letter, an instant with a digit), kept
in the paths as it was typed; ``/.afi/at`` lists the snapshots. Beneath it:

- ``facts/<name>.md`` and ``procedures/<name>.md``: the version of each name that was valid then and
  already written then (superseded since, expired since, or written later: the past is what was
  believed at that instant, not today's knowledge of it). Forgotten notes stay forgotten.
- ``history/<id>.md``: every version written by then.
- ``files/<path>``: the workspace as it stood then, from the files' kept versions (:mod:`.at_files`).
- ``sessions/<id>.md`` and ``episodes/<id>.md``: the ledger up to then (:mod:`.at_ledger`).

A version reads as it stood then (:mod:`.versions`): its ``status`` is what it was at that instant,
and what later writes gave its row (a ``valid_to`` set by a successor or a restore since, an
``updated_at`` or ``ingested_at`` after the instant) is left out; an end it was written with stays.
Search reaches these paths like any other and greps that same text (:mod:`..search`). Working blocks
keep no past of their own yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from afi.errors import InvalidPath, NotFound
from afi.model import Entry, Page, ReadResult

from ..fabric.errors import MemoryValidationError
from ..fabric.fields import ISO_8601, canonical_time
from ..horizon import check_horizon
from .at_files import at_files_list, at_files_read, at_files_stat
from .at_ledger import AT_LEDGER_AREAS, ledger_list_at, ledger_text_at
from .base import Listing
from .entries import dir_entry, row_entry
from .notes_view import file_name, id_name

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = [
    "AT_AREAS",
    "AT_FILES",
    "AT_FOLDERS",
    "AT_ROOT",
    "AtPath",
    "at_list",
    "at_read",
    "at_stat",
    "at_text",
    "instant",
    "parse_at",
    "resolve_instant",
]

AT_ROOT = "/.afi/at"
AT_AREAS: dict[str, str | None] = {"facts": "fact", "history": None, "procedures": "procedure"}
AT_FILES = "files"  # the workspace's past, beside the notes' areas
AT_FOLDERS: tuple[str, ...] = tuple(sorted([*AT_AREAS, AT_FILES, *AT_LEDGER_AREAS]))


@dataclass(frozen=True)
class AtPath:
    """A path inside ``/.afi/at``: the instant's segment as typed, the instant, and the rest."""

    segment: str  # "" for /.afi/at itself
    at: str  # the instant, canonical (UTC, milliseconds)
    area: str  # "" for the instant's own folder
    name: str  # "" for an area folder; in ``files``, the workspace path (slashes and all)

    @property
    def base(self) -> str:
        return f"{AT_ROOT}/{self.segment}"


# a date (2026-11-30 or 20261130), then a time to the minute, second or fraction, then a zone
def instant(segment: str, path: str) -> str:
    """Given an instant as a path segment, return it canonical; InvalidPath when it is no instant."""
    try:
        if segment[:1].isalpha() or not ISO_8601.fullmatch(segment):  # a snapshot's name starts with a letter
            raise MemoryValidationError(segment)  # Python's parser takes "1" * 5000 or a control character
        return canonical_time(segment, "the instant")
    except MemoryValidationError:
        raise InvalidPath(
            f"{segment!r} is not an instant: use ISO 8601, such as 2026-11-30T10:00:00Z or 2026-11-30", path=path
        ) from None


def resolve_instant(segment: str, path: str, space: Space) -> str:
    """The instant a path segment names: an ISO 8601 time, or a snapshot of the space by its name."""
    if segment[:1].isalpha():
        found = space.snapshots.get(segment)
        if found is None:
            raise NotFound(f"no snapshot named {segment!r} in this space (afi snapshot list)", path=path)
        at = found.at
    else:
        at = instant(segment, path)
    return check_horizon(space.files.database, space.files.space, at, path=path)


def parse_at(path: str, space: Space) -> AtPath | None:
    """Given a normalised path, return where it lands inside ``/.afi/at`` (None when it is not there)."""
    if path != AT_ROOT and not path.startswith(AT_ROOT + "/"):
        return None
    parts = path[len(AT_ROOT) + 1 :].split("/") if path != AT_ROOT else []
    if not parts:
        return AtPath("", "", "", "")
    at = resolve_instant(parts[0], path, space)
    area = parts[1] if len(parts) > 1 else ""
    if area and area not in AT_FOLDERS:
        raise NotFound(f"an instant shows {', '.join(AT_FOLDERS)} (working blocks keep no past yet)", path=path)
    if area == AT_FILES:
        return AtPath(parts[0], at, area, "/".join(parts[2:]))
    if len(parts) > 3:
        raise NotFound("no such note: the folders of an instant are flat", path=path)
    return AtPath(parts[0], at, area, parts[2] if len(parts) == 3 else "")


def _note(space: Space, where: AtPath, path: str) -> tuple[Entry, str]:
    if where.area in AT_LEDGER_AREAS:
        return ledger_text_at(space, where.at, where.area, where.name, path)
    if not where.name.endswith(".md") or len(where.name) <= 3:
        raise NotFound(f"notes in {where.base}/{where.area} are named <name>.md", path=path)
    name = where.name[:-3]
    kind = AT_AREAS[where.area]
    found = space.notes.current(kind, name, where.at) if kind else space.notes.version(name, where.at)
    if found is None:
        raise NotFound(f"no such note at {where.segment}", path=path)
    row, rendered = found
    return row_entry(path, row, writable=False), rendered


def at_text(space: Space, where: AtPath, path: str) -> tuple[Entry, str]:
    """A note of an instant: its entry (read-only) and its text as it read then."""
    if not where.name:
        raise InvalidPath("this is a folder, not a file: list it instead of reading it", path=path)
    if where.area == AT_FILES:
        raise InvalidPath("a workspace file of an instant is read as bytes, not as a note", path=path)
    return _note(space, where, path)


def at_stat(space: Space, where: AtPath, path: str) -> Entry:
    if where.area == AT_FILES and where.name:
        return at_files_stat(space, where.at, where.name, path)
    if where.name:
        return _note(space, where, path)[0]
    entry = dir_entry(path, where.at or None)
    return entry.model_copy(update={"attributes": {"permissions": "r"}})


def at_list(space: Space, where: AtPath, path: str, listing: Listing) -> Page:
    if where.area == AT_FILES:
        return at_files_list(space, where.at, where.name, path, listing)
    if where.name:
        _note(space, where, path)
        raise InvalidPath("this is a file, not a folder: read it instead of listing it", path=path)
    if not where.segment:  # the snapshots (any other instant is named, not listed)
        snapshots = space.snapshots.list()
        return listing.page([at_stat(space, AtPath(s.name, s.at, "", ""), f"{AT_ROOT}/{s.name}") for s in snapshots])
    if not where.area:
        return listing.page([at_stat(space, AtPath(where.segment, where.at, a, ""), f"{path}/{a}") for a in AT_FOLDERS])
    if where.area in AT_LEDGER_AREAS:
        return listing.page(ledger_list_at(space, where.at, where.area, path))
    kind = AT_AREAS[where.area]
    if kind is None:
        rows = listing.fill(lambda after, n: space.notes.list_history(after=after, glob=listing.glob, limit=n,
                                                                      at=where.at), id_name)  # fmt: skip
        return listing.cut([row_entry(f"{path}/{r.id}.md", r, writable=False) for r in rows])
    rows = listing.fill(lambda after, n: space.notes.list_current(kind, after=after, glob=listing.glob, limit=n,
                                                                  at=where.at), file_name)  # fmt: skip
    return listing.cut([row_entry(f"{path}/{r.name or r.id}.md", r, writable=False) for r in rows])


def at_read(space: Space, where: AtPath, path: str, offset: int, length: int | None) -> ReadResult | None:
    """A workspace file of an instant, as bytes (None for any other path of ``/.afi/at``: a note's text)."""
    if where.area != AT_FILES or not where.name:
        return None
    return at_files_read(space, where.at, where.name, path, offset, length)
