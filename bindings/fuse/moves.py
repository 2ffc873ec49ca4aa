"""Renames through the mount, and the errno a person understands when one cannot be made as asked.

A memory-only file (an editor's temp file) renamed onto a name the provider stores is written there;
a held file (content the provider refused) renamed where the provider still refuses it stays held
under its new name; a stored file is moved by the provider. A move the provider does not make between
two places (a note from ``/procedures`` to ``/facts``, a note to ``/files``) is EXDEV, as between two
disks: ``mv`` then copies and deletes, which stores the note under its new kind.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from afi.errors import Internal, InvalidPath, NotFound, TooLarge, Unsupported

from .base import fuse_error, log

if TYPE_CHECKING:
    from .ops import AfiFS

__all__ = ["rename_path"]


async def rename_path(fs: AfiFS, source: str, destination: str, *, keep: bool) -> None:
    """Move ``source`` to ``destination`` (``keep``: never over an existing one) and repoint what the mount holds."""
    if keep and destination in fs.locals:
        raise fuse_error(errno.EEXIST)
    local = fs.locals.get(source)
    if local is not None:
        try:
            entry = await fs.call(fs.provider.write, destination, local.data, create_only=keep)
        except (InvalidPath, TooLarge, Internal) as err:
            name_refused = isinstance(err, InvalidPath) and await _name_refused(fs, destination)
            if not name_refused and not local.held:  # what it holds is refused (an empty note), not the name
                log.warning("%s: not stored: %s", destination, err.message)
                raise
            # An editor's temp file under another name the provider refuses, or a held file (its bytes still
            # refused) moved by the user: the mount keeps it under the new name, a held one on disk too.
            fs.locals.rename(source, destination, reason=" ".join(err.message.split()))
            await fs.locals.sync(source, destination)
            fs.inodes.moved(source, destination)
            fs.handles.repoint(source, destination)
            fs.invalidator.refused(destination)
            return
        fs.locals.pop(source)
    else:
        try:
            entry = await fs.call(fs.provider.move, source, destination, overwrite=not keep)
        except Unsupported:
            raise fuse_error(errno.EXDEV) from None  # not a move the provider makes: mv copies and deletes
    fs.locals.pop(destination)
    await fs.locals.sync(source, destination)
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
