"""``/history``: every stored version of every note, by id, read-only (superseded and expired included,
each saying so: :mod:`.versions`), and ``files/``, every kept version of every workspace file
(:mod:`.history_files`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from afi.errors import NotFound
from afi.model import Entry, Page, ReadResult

from .at_files import read_only_dir
from .base import Area, Listing
from .entries import row_entry
from .history_files import FILES_DIR, history_files_list, history_files_read, history_files_stat
from .locate import Node
from .notes_view import id_name

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["HistoryArea", "version_text"]

_FILES = "files"


def _in_files(node: Node) -> str | None:
    """The workspace path a node under ``/history/files`` names ("" for the folder itself), else None."""
    if node.rest == _FILES:
        return ""
    return node.rest[len(_FILES) + 1 :] if node.rest.startswith(_FILES + "/") else None


class HistoryArea(Area):
    """Listed as a paged index scan over the notes table; held and forgotten versions are left out.
    The ``files`` folder, listed once the space keeps a file version, sorts among the ``<id>.md`` by name."""

    def stat(self, space: Space, node: Node) -> Entry:
        rel = _in_files(node)
        return super().stat(space, node) if rel is None else history_files_stat(space, rel, node.path)

    def list(self, space: Space, node: Node, listing: Listing) -> Page:
        rel = _in_files(node)
        if rel is not None:
            return history_files_list(space, rel, node.path, listing)
        if not node.is_area_root:
            return super().list(space, node, listing)
        rows = listing.fill(lambda after, n: space.notes.list_history(after=after, glob=listing.glob, limit=n),
                            id_name)  # fmt: skip
        entries = [row_entry(f"/history/{r.id}.md", r, writable=False) for r in rows]
        shown = listing.after is None or listing.after < _FILES
        if shown and Listing(1, listing.glob).page([read_only_dir(FILES_DIR)]).entries and space.files.kept():
            entries.append(read_only_dir(FILES_DIR))
            entries.sort(key=lambda e: e.path)
        return listing.cut(entries[: listing.limit + 1])

    def read(self, space: Space, node: Node, offset: int, length: int | None) -> ReadResult:
        rel = _in_files(node)
        if rel is None:
            return super().read(space, node, offset, length)
        return history_files_read(space, rel, node.path, offset, length)

    def text(self, space: Space, node: Node) -> tuple[Entry, str]:
        return version_text(space, node.path, node.note_name)


def version_text(space: Space, path: str, note_id: str) -> tuple[Entry, str]:
    """One stored version's entry (read-only) and its text as it reads now."""
    found = space.notes.version(note_id)
    if found is None:
        raise NotFound("no such note", path=path)
    row, rendered = found
    return row_entry(path, row, writable=False), rendered
