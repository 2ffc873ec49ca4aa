"""How the tree's things look as AFI Entries: folders, workspace files, notes, blocks, the manifest."""

from __future__ import annotations

import mimetypes
import posixpath
from typing import Any

from afi.model import Entry, rfc3339

from ..fabric.render import render_note
from ..fabric.types import MemoryNote
from ..workspace.workspace import FileStat
from .notes_view import NoteRow, rendered_etag

__all__ = ["EPOCH", "block_entry", "content_type", "dir_entry", "file_entry", "manifest_entry", "row_entry"]

EPOCH = "1970-01-01T00:00:00.000Z"
READ_ONLY_DIRS = frozenset({"/", "/.afi", "/history", "/episodes", "/sessions"})


def dir_entry(path: str, at: str | None = None) -> Entry:
    """A folder of the fixed tree; ``at`` is its time (:class:`~.times.SpaceClock`), else the epoch."""
    read_only = path in READ_ONLY_DIRS
    return Entry(
        path=path,
        type="directory",
        size=0,
        mtime=at or EPOCH,
        ctime=at or EPOCH,
        content_type="inode/directory",
        attributes={"permissions": "r" if read_only else "rw"},
    )


def file_entry(path: str, info: FileStat) -> Entry:
    if info.kind == "directory":
        return Entry(
            path=path,
            type="directory",
            size=0,
            mtime=rfc3339(info.mtime),
            ctime=rfc3339(info.ctime),
            content_type="inode/directory",
            attributes={"permissions": "rw"},
        )
    return Entry(
        path=path,
        type="symlink" if info.kind == "symlink" else "file",
        size=info.size,
        mtime=rfc3339(info.mtime),
        ctime=rfc3339(info.ctime),
        content_type=content_type(path),
        etag=f'"f{info.ino:x}-{info.mtime_ns:x}-{info.size:x}"',
        target=info.target,
        attributes={"permissions": "rw"},
    )


def manifest_entry(body: bytes) -> Entry:
    """The manifest file's entry, given its bytes."""
    return Entry(
        path="/.afi/manifest.json",
        type="file",
        size=len(body),
        mtime=EPOCH,
        ctime=EPOCH,
        content_type="application/json",
        etag=rendered_etag(body.decode()),
        attributes={"permissions": "r"},
    )


def block_entry(label: str, note: MemoryNote, text: str | None = None) -> Entry:
    """A working block's entry (rendering it unless the text is given)."""
    rendered = text if text is not None else render_note(note)
    stamp = note.updated_at or note.ingested_at
    return Entry(
        path=f"/working/{label}.md",
        type="file",
        size=len(rendered.encode()),
        mtime=stamp,
        ctime=note.created_at,
        content_type="text/markdown",
        etag=rendered_etag(rendered),
        attributes={"permissions": "rw", "x-kind": "working", "x-id": note.id, "x-block": label},
    )


def row_entry(path: str, row: NoteRow, *, writable: bool = True) -> Entry:
    attributes: dict[str, Any] = {"permissions": "rw" if writable else "r", "x-kind": row.kind, "x-id": row.id}
    if row.path:
        attributes["x-file"] = "/files/" + row.path
    return Entry(
        path=path,
        type="file",
        size=row.size,
        mtime=row.mtime,
        ctime=row.created_at,
        content_type="text/markdown",
        etag=row.etag,
        attributes=attributes,
    )


_TEXT_TYPES = {
    ".md": "text/markdown",
    ".txt": "text/plain",
    ".json": "application/json",
    ".py": "text/x-python",
    ".csv": "text/csv",
    ".html": "text/html",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
}


def content_type(path: str) -> str:
    suffix = posixpath.splitext(path)[1].lower()
    if suffix in _TEXT_TYPES:
        return _TEXT_TYPES[suffix]
    guessed, _ = mimetypes.guess_type(path)
    return guessed or "application/octet-stream"
