"""Keeping ``/files``' past: each write, delete and move of a workspace file records a version
(:class:`~..workspace.history.FileHistory`), under the space's write lock the verb holds.

Before a verb changes a file, :func:`keep_before` makes sure the history holds the bytes it has now:
a file with no row yet (written before file history, or on disk behind the provider's back), or
whose bytes are no longer those of its newest row (edited on disk since), first gets a version of
its current bytes stamped with its modification time, so no previous content is lost. After the
verb, :func:`keep_written`, :func:`keep_deleted` and :func:`keep_moved` record what it left.
"""

from __future__ import annotations

import os
import stat as stat_mod
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from afi.errors import AfiError

from ..fabric.errors import MemoryValidationError
from ..fabric.rows import iso_now
from ..workspace.digest import file_digest
from ..workspace.history import FileHistory

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["digest_now", "files_below", "keep_before", "keep_deleted", "keep_moved", "keep_written"]


def _stamp(mtime_ns: int) -> str:
    return datetime.fromtimestamp(mtime_ns / 1e9, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _current(space: Space, rel: str, keep_bytes: int) -> tuple[str, int, int, bytes | None] | None:
    """(digest, size, mtime_ns, bytes or None when not kept) of the regular file at ``rel``
    (:func:`~..workspace.digest.file_digest`: its holes are not read); None when there is none
    (absent, a folder, a symlink, a special or hard-linked file)."""
    try:
        fd = space.workspace.jail.open(rel, os.O_RDONLY | os.O_NONBLOCK)
    except (MemoryValidationError, OSError):
        return None
    try:
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode) or st.st_nlink > 1:
            return None
        found = file_digest(fd, st.st_size, keep_bytes)
        return found.sha256, found.size, st.st_mtime_ns, found.data
    finally:
        os.close(fd)


def digest_now(space: Space, rel: str) -> str | None:
    """The digest a version of the file at ``rel`` would record now (None when no regular file is there)."""
    found = _current(space, rel, 0)
    return None if found is None else found[0]


def _history(space: Space) -> FileHistory:
    return space.files


def _record(history: FileHistory, rel: str, found: tuple[str, int, int, bytes | None], at: str, op: str) -> None:
    sha, size, _, data = found
    if data is not None:
        history.record_write(rel, data, at, op=op)
    else:
        history.record_hash(rel, sha, size, at, op=op)


def keep_before(space: Space, rels: Sequence[str]) -> None:
    """Before changing these files, record the current bytes of each the history does not hold yet."""
    history = _history(space)
    for rel in rels:
        found = _current(space, rel, history.max_blob_bytes)
        if found is None:
            continue
        latest = history.latest(rel)
        if latest is not None and latest.sha256 == found[0]:
            continue
        at = min(_stamp(found[2]), iso_now())
        if latest is not None and latest.at > at:
            at = latest.at  # edited on disk after its newest row, whatever its clock says: ordered after it
        _record(history, rel, found, at, "write")


def keep_written(space: Space, rel: str, full: bytes | None = None) -> None:
    """After a write of ``rel``: record the bytes it holds now (``full``, when the index read them whole)."""
    history = _history(space)
    if full is not None:
        history.record_write(rel, full, iso_now())
        return
    found = _current(space, rel, history.max_blob_bytes)
    if found is not None:
        _record(history, rel, found, iso_now(), "write")


def keep_deleted(space: Space, rels: Sequence[str]) -> None:
    """After a delete: record every removed file as absent (one row each)."""
    at = iso_now()
    for rel in rels:
        _history(space).record_delete(rel, at)


def keep_moved(space: Space, moved: Sequence[tuple[str, str]]) -> None:
    """After a move: each source is absent from now on, each destination holds the bytes moved there."""
    history = _history(space)
    at = iso_now()
    for old, new in moved:
        history.record_delete(old, at, op="move")
        found = _current(space, new, history.max_blob_bytes)
        if found is not None:
            _record(history, new, found, at, "move")


def files_below(space: Space, rel: str) -> list[str]:
    """The workspace paths of the regular files at or below ``rel`` (a file itself, or a folder's)."""
    try:
        info = space.workspace.stat(rel, f"/files/{rel}")
    except AfiError:
        return []
    if info.kind == "directory":
        return [p for p, _ in space.workspace.index.walk(rel)]
    return [rel] if info.kind == "file" else []
