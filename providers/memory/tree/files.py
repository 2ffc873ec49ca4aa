"""``/files``: the space's jailed workspace of real files and folders, each file with a ``file`` note.

A write stores the file, then remembers its text (cut at the note cap; its path when binary) as the
file's note; a delete forgets the notes of the files it removed; a move repoints them
(docs/memory-fabric.md, "Following the file").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from afi.errors import Conflict, NotFound
from afi.model import DeleteResult, Entry, Page, ReadResult

from ..fabric.repoint import create_fabric_repoint_handler, repoint_source
from .base import Area, Listing, WriteOptions, check_etag
from .entries import file_entry
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
        children = space.workspace.listdir(node.rest, node.path)
        return listing.page([file_entry(f"{node.path}/{c.name}", c) for c in children])

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
        info, full = space.workspace.write(node.rest, node.path, data, offset=options.offset, append=options.append,
                                           create_only=options.create_only)  # fmt: skip
        text = _note_text_of(full, node.rest, space.fabric.memory.limits.max_entry_text_chars)
        space.fabric.remember(kind="file", path=node.rest, content=text)
        return file_entry(node.path, info)

    def mkdir(self, space: Space, node: Node, *, parents: bool) -> Entry:
        return file_entry(node.path, space.workspace.mkdir(node.rest, node.path, parents=parents))

    def delete(self, space: Space, node: Node, *, recursive: bool) -> DeleteResult:
        removed = space.workspace.delete(node.rest, node.path, recursive=recursive)
        for rel in removed:
            note = space.fabric.find_file(rel)
            if note is not None:
                space.fabric.forget(id=note.id)
        return DeleteResult(deleted=max(1, len(removed)))

    def move(self, space: Space, src: Node, dst: Node, *, overwrite: bool) -> Entry:
        info, moved = space.workspace.move(src.rest, src.path, dst.rest, dst.path, overwrite=overwrite)
        memory = space.fabric.memory
        for old, new in moved:
            repoint_source(memory, old, new, handlers=[create_fabric_repoint_handler(memory)])
        return file_entry(dst.path, info)


def _note_text_of(data: bytes | None, rel: str, cap: int) -> str:
    """The text a file's note indexes: the file's text (cut at the note cap), or its path when binary."""
    if data is None or b"\x00" in data:
        return rel
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return rel
    return text[:cap] if text.strip() else rel
