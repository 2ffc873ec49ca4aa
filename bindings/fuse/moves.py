"""Renames through the mount, and the errno a person understands when one cannot be made as asked.

A memory-only file (an editor's temp file) renamed onto a name the provider stores is written there;
a stored file is moved by the provider. A move the provider does not make between two places (a note
from ``/procedures`` to ``/facts``, a note to ``/files``) is EXDEV, as between two disks: ``mv`` then
copies and deletes, which stores the note under its new kind.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from afi.errors import InvalidPath, NotFound, Unsupported

from .base import fuse_error, log

if TYPE_CHECKING:
    from .ops import AfiFS

__all__ = ["rename_path"]


async def rename_path(fs: AfiFS, source: str, destination: str, *, keep: bool) -> None:
    """Move ``source`` to ``destination`` (``keep``: never over an existing one) and repoint what the mount holds."""
    local = fs.locals.get(source)
    if local is not None:
        try:
            entry = await fs.call(fs.provider.write, destination, local.data, create_only=keep)
        except InvalidPath as err:
            if not await _name_refused(fs, destination):  # what it holds is refused (an empty note), not the name
                log.warning("%s: not stored: %s", destination, err.message)
                raise
            fs.locals.rename(source, destination, reason=err.message)  # still not a name the provider stores
            fs.inodes.moved(source, destination)
            fs.handles.repoint(source, destination)
            return
        fs.locals.pop(source)
    else:
        if keep and destination in fs.locals:
            raise fuse_error(errno.EEXIST)
        try:
            entry = await fs.call(fs.provider.move, source, destination, overwrite=not keep)
        except Unsupported:
            raise fuse_error(errno.EXDEV) from None  # not a move the provider makes: mv copies and deletes
    fs.locals.pop(destination)
    fs.inodes.moved(source, destination)
    fs.handles.repoint(source, destination)
    fs.invalidator.stored(destination, entry)  # the source's node, moved; the kernel knows it


async def _name_refused(fs: AfiFS, path: str) -> bool:
    """Whether the provider refuses ``path`` as a name (its ``stat`` says invalid_path, not not_found)."""
    try:
        await fs.call(fs.provider.stat, path)
    except InvalidPath:
        return True
    except NotFound:
        return False
    return False
