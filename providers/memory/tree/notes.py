"""``/facts`` and ``/procedures``: the notes of one kind valid now; and what every folder of notes shares.

Notes are the fabric's: writing ``/facts/x.md`` is ``remember(kind="fact", name="x")``, deleting is
``forget``. A note is written whole (or appended to), as Markdown with its front matter; a write whose
validity window leaves out now is refused, since a note path holds the version valid now.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from afi.errors import Conflict, InvalidPath, NotFound, Unsupported
from afi.model import DeleteResult, Entry, Page

from ..fabric.render import parse_note
from ..fabric.types import MemoryNote
from .base import Area, Listing, WriteOptions, check_etag
from .entries import row_entry
from .history import version_text
from .locate import Node, note_path
from .notes_view import file_name

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["NoteFolder", "NotesArea"]

MOVED_FIELDS = {"valid_from", "valid_to", "tags", "keywords", "context", "importance", "source_entry_ids"}


class NoteFolder(Area):
    """A writable, flat folder of ``<name>.md`` notes; subclasses say how a note is found, stored and removed."""

    missing = "no such note"

    def existing(self, space: Space, name: str) -> MemoryNote | None:
        raise NotImplementedError

    def store(
        self, space: Space, name: str, content: str, fields: dict[str, Any], existing: MemoryNote | None
    ) -> MemoryNote:
        raise NotImplementedError

    def remove(self, space: Space, name: str, note: MemoryNote) -> None:
        raise NotImplementedError

    def rename(self, space: Space, note: MemoryNote, old: str, new: str) -> None:
        raise NotImplementedError

    def write(self, space: Space, node: Node, data: bytes, options: WriteOptions) -> Entry:
        name = node.note_name
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidPath("notes are UTF-8 text", path=node.path) from None
        existing = self.existing(space, name)
        if existing is not None and options.create_only:
            raise Conflict("the note exists and create_only was asked", path=node.path)
        if options.if_match is not None:
            if existing is None:
                raise Conflict("if_match was given but the note does not exist", path=node.path)
            check_etag(self.stat(space, node), options.if_match)
        if options.offset not in (None, 0) and not options.append:
            raise Unsupported("notes are written whole: write from offset 0, or append", path=node.path)
        if options.append:
            fields: dict[str, Any] = {}
            base = existing.content if existing is not None else ""
            if base and not base.endswith("\n"):
                base += "\n"  # appended after the text as it reads (a note's body ends with a newline)
            content = base + text
        else:
            fields, content = parse_note(text)
        if not content.strip():
            raise InvalidPath("a note cannot be empty: rm it to forget it", path=node.path)
        if _window_excludes(fields, space.fabric.memory.present()):
            raise InvalidPath(
                "the front matter's valid_from/valid_to window does not include now, and a note path holds the "
                "version valid now: record past or future versions with 'afi remember --valid-from/--valid-to'",
                path=node.path,
            )
        note = self.store(space, name, content, fields, existing)
        try:
            return self.stat(space, node)
        except NotFound:  # stored, but no longer the version valid now (a clock edge): show where it lives
            return version_text(space, f"/history/{note.id}.md", note.id)[0]

    def delete(self, space: Space, node: Node, *, recursive: bool) -> DeleteResult:
        name = node.note_name
        note = self.existing(space, name)
        if note is None:
            raise NotFound(self.missing, path=node.path)
        self.remove(space, name, note)
        return DeleteResult(deleted=1)

    def move(self, space: Space, src: Node, dst: Node, *, overwrite: bool) -> Entry:
        old, new = src.note_name, dst.note_name
        note = self.existing(space, old)
        if note is None:
            raise NotFound("no such note", path=src.path)
        if old == new:
            return self.stat(space, dst)
        if self.existing(space, new) is not None and not overwrite:
            raise Conflict("the destination exists (ask to overwrite)", path=dst.path)
        self.rename(space, note, old, new)
        return self.stat(space, dst)


class NotesArea(NoteFolder):
    """``/facts`` (kind ``fact``) or ``/procedures`` (kind ``procedure``), listed as a paged index scan."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def list(self, space: Space, node: Node, listing: Listing) -> Page:
        if not node.is_area_root:
            return super().list(space, node, listing)
        kind = self.kind
        rows = listing.fill(lambda after, n: space.notes.list_current(kind, after=after, glob=listing.glob, limit=n),
                            file_name)  # fmt: skip
        return listing.cut([row_entry(note_path(r.kind, r.name or r.id), r) for r in rows])

    def text(self, space: Space, node: Node) -> tuple[Entry, str]:
        found = space.notes.current(self.kind, node.note_name)
        if found is None:
            raise NotFound("no such note", path=node.path)
        row, rendered = found
        return row_entry(node.path, row), rendered

    def existing(self, space: Space, name: str) -> MemoryNote | None:
        return space.fabric.find(self.kind, name)

    def store(
        self, space: Space, name: str, content: str, fields: dict[str, Any], existing: MemoryNote | None
    ) -> MemoryNote:
        if existing is not None and fields.get("supersedes") == existing.supersedes:
            fields.pop("supersedes", None)  # unchanged front matter from a read, not a new claim
        return space.fabric.remember(kind=self.kind, name=name, content=content, **fields)

    def remove(self, space: Space, name: str, note: MemoryNote) -> None:
        space.fabric.forget(id=note.id)

    def rename(self, space: Space, note: MemoryNote, old: str, new: str) -> None:
        fields = {k: v for k, v in note.model_dump(include=MOVED_FIELDS).items() if v not in (None, [])}
        space.fabric.remember(kind=self.kind, name=new, content=note.content, **fields)
        space.fabric.forget(id=note.id)


def _window_excludes(fields: dict[str, Any], present: str) -> bool:
    """True when written front matter puts the note's validity window wholly before or after the
    space's present."""
    now = datetime.fromisoformat(present.replace("Z", "+00:00"))

    def moment(value: Any) -> datetime:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)

    try:
        starts = fields.get("valid_from")
        ends = fields.get("valid_to")
        return (starts is not None and moment(starts) > now) or (ends is not None and moment(ends) <= now)
    except ValueError:
        return False  # a malformed timestamp: the fabric refuses it with its own message
