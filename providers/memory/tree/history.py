"""``/history``: every stored version of every note, by id, read-only (superseded and expired included)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from afi.errors import NotFound
from afi.model import Entry, Page

from .base import Area, Listing
from .entries import row_entry
from .locate import Node

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["HistoryArea", "version_text"]


class HistoryArea(Area):
    """Listed as a paged index scan over the notes table; held and forgotten versions are left out."""

    def list(self, space: Space, node: Node, listing: Listing) -> Page:
        if not node.is_area_root:
            return super().list(space, node, listing)
        rows = space.notes.list_history(after=listing.after, glob=listing.sql_glob, limit=listing.limit + 1)
        return listing.cut([row_entry(f"/history/{r.id}.md", r, writable=False) for r in rows])

    def text(self, space: Space, node: Node) -> tuple[Entry, str]:
        return version_text(space, node.path, node.note_name)


def version_text(space: Space, path: str, note_id: str) -> tuple[Entry, str]:
    """One stored version's entry (read-only) and rendering."""
    found = space.notes.version(note_id)
    if found is None:
        raise NotFound("no such note", path=path)
    row, rendered = found
    return row_entry(path, row, writable=False), rendered
