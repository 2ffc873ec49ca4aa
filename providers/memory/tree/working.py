"""``/working``: the working blocks, one ``<label>.md`` each; a write sets the block, a delete clears it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from afi.errors import NotFound
from afi.model import Entry

from ..fabric.errors import MemoryValidationError
from ..fabric.render import render_note
from ..fabric.types import MemoryNote
from .entries import block_entry
from .locate import Node
from .notes import NoteFolder

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["KEPT_FIELDS", "WorkingArea"]

KEPT_FIELDS = frozenset({"importance"})  # the front-matter fields a block keeps


class WorkingArea(NoteFolder):
    """The working blocks of a space (few and small: listed whole; of the front matter, only importance is kept)."""

    missing = "no such working block"

    def children(self, space: Space) -> list[Entry]:
        # by file name, as the cursor compares: "a-b.md" comes before "a.md" though "a" is before "a-b"
        entries = [block_entry(label, note) for label, note in space.fabric.blocks().items()]
        return sorted(entries, key=lambda entry: entry.path)

    def text(self, space: Space, node: Node) -> tuple[Entry, str]:
        name = node.note_name
        note = space.fabric.blocks().get(name)
        if note is None:
            raise NotFound(self.missing, path=node.path)
        text = render_note(note)
        return block_entry(name, note, text), text

    def existing(self, space: Space, name: str) -> MemoryNote | None:
        return space.fabric.blocks().get(name)

    def store(
        self, space: Space, name: str, content: str, fields: dict[str, Any], existing: MemoryNote | None
    ) -> MemoryNote:
        unkept = sorted(set(fields) - KEPT_FIELDS)
        if unkept:  # refused, never dropped: a write that says it stored tags has stored them
            raise MemoryValidationError(
                f"a working block keeps its content and importance only, not {', '.join(unkept)}: "
                "remove them, or write the note under /facts or /procedures"
            )
        return space.fabric.remember(kind="working", block=name, content=content, importance=fields.get("importance"))

    def remove(self, space: Space, name: str, note: MemoryNote) -> None:
        space.fabric.forget(block=name)

    def rename(self, space: Space, note: MemoryNote, old: str, new: str) -> None:
        space.fabric.remember(kind="working", block=new, content=note.content)
        space.fabric.forget(block=old)
