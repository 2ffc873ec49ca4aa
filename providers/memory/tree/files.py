"""``/files``: the space's jailed workspace of real files and folders, each text file with a ``file`` note.

A write stores the file, then brings its note in line (:mod:`.file_notes`: the text, cut at the note
cap, unless the file is binary, empty or ignored); a delete retires the notes of the files it
removed; a move retires those of a file it overwrites and repoints the moved ones
(docs/memory-fabric.md, "Following the file"). Each of them keeps the files' previous and new bytes
as versions (:mod:`.file_history`: ``/history/files`` and ``/.afi/at/<instant>/files`` show them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from afi.errors import Conflict, InvalidPath, NotFound
from afi.model import DeleteResult, Entry, Page, ReadResult

from ..workspace.ignore import AFIIGNORE, AFIIGNORE_MAX_BYTES, check_afiignore
from .base import Area, Listing, WriteOptions, check_etag
from .entries import file_entry
from .file_history import files_below, keep_before, keep_deleted, keep_moved, keep_written
from .file_notes import file_written, files_deleted, files_moved
from .folder_history import folders_below, keep_folders, moved_folders
from .locate import Node

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["FilesArea"]


class FilesArea(Area):
    """Every verb goes to the space's :class:`~..workspace.workspace.Workspace`, with the path inside it."""

    def stat(self, space: Space, node: Node) -> Entry:
        if node.is_area_root:
            return super().stat(space, node)
        return file_entry(node.path, space.workspace.stat(node.rest, node.path))

    def list(self, space: Space, node: Node, listing: Listing) -> Page:
        children = space.workspace.list_page(node.rest, node.path, after=listing.after, limit=listing.limit + 1,
                                             prefix=listing.prefix, matches=listing.matcher())  # fmt: skip
        return listing.cut([file_entry(f"{node.path}/{c.name}", c) for c in children])

    def read(self, space: Space, node: Node, offset: int, length: int | None) -> ReadResult:
        if node.is_area_root:
            return super().read(space, node, offset, length)
        data, info = space.workspace.read(node.rest, node.path, offset, length)
        entry = file_entry(node.path, info)
        return ReadResult(data=data, content_type=entry.content_type, eof=offset + len(data) >= info.size,
                          size=info.size, etag=entry.etag, mtime=entry.mtime)  # fmt: skip

    def write(self, space: Space, node: Node, data: bytes, options: WriteOptions) -> Entry:
        if options.if_match is not None:
            try:
                current = file_entry(node.path, space.workspace.stat(node.rest, node.path))
            except NotFound:
                raise Conflict("if_match was given but the file does not exist", path=node.path) from None
            check_etag(current, options.if_match)
        if node.rest == AFIIGNORE:
            check_afiignore(_after_write(space, node, data, options))
        keep_before(space, [node.rest])
        info, full = space.workspace.write(node.rest, node.path, data, offset=options.offset, append=options.append,
                                           create_only=options.create_only)  # fmt: skip
        keep_written(space, node.rest, full)
        file_written(space, node.rest, full)
        return file_entry(node.path, info)

    def mkdir(self, space: Space, node: Node, *, parents: bool) -> Entry:
        made = file_entry(node.path, space.workspace.mkdir(node.rest, node.path, parents=parents))
        keep_folders(space, [(node.rest, "mkdir")])
        return made

    def delete(self, space: Space, node: Node, *, recursive: bool) -> DeleteResult:
        keep_before(space, files_below(space, node.rest))
        folders = folders_below(space, node.rest)
        removed = space.workspace.delete(node.rest, node.path, recursive=recursive)
        keep_deleted(space, removed)
        keep_folders(space, [(path, "rmdir") for path in folders])
        files_deleted(space, removed)
        return DeleteResult(deleted=max(1, len(removed)))

    def move(self, space: Space, src: Node, dst: Node, *, overwrite: bool) -> Entry:
        replaced = _file_at(space, dst) if overwrite else None
        keep_before(space, files_below(space, src.rest) + ([replaced] if replaced is not None else []))
        folders = folders_below(space, src.rest)
        info, moved = space.workspace.move(src.rest, src.path, dst.rest, dst.path, overwrite=overwrite)
        keep_moved(space, moved)
        keep_folders(space, moved_folders(folders, src.rest, dst.rest))
        files_moved(space, moved, [replaced] if replaced is not None and moved else [])
        return file_entry(dst.path, info)


def _after_write(space: Space, node: Node, data: bytes, options: WriteOptions) -> bytes:
    """The bytes a write would leave in a small file (an append or a write at an offset included)."""
    if options.offset is None and not options.append:
        return data
    try:
        before, _ = space.workspace.read(node.rest, node.path, 0, AFIIGNORE_MAX_BYTES + 1)
    except NotFound:
        before = b""
    if options.append:
        return before + data
    at = options.offset or 0
    return before[:at].ljust(at, b"\x00") + data + before[at + len(data) :]


def _file_at(space: Space, node: Node) -> str | None:
    """The workspace path of the regular file at ``node``, if one is there (a move would replace it)."""
    try:
        entry = space.workspace.stat(node.rest, node.path)
    except (NotFound, InvalidPath):
        return None
    return node.rest if entry.kind == "file" else None
