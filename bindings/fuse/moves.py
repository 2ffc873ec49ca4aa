"""Renames through the mount, and the errno a person understands when one cannot be made as asked.

A memory-only file (an editor's temp file) renamed onto a name the provider stores is written there;
a held file (content the provider refused) renamed where the provider still refuses it stays held
under its new name; a stored file is moved by the provider. A move the provider does not make between
two places (a note from ``/procedures`` to ``/facts``, a note to ``/files``) is EXDEV, as between two
disks: ``mv`` then copies and deletes, which stores the note under its new kind.
"""

from __future__ import annotations

import errno

from afi.errors import Internal, InvalidPath, NotFound, TooLarge, Unsupported
from afi.provider import Provider

from .base import Calls, fuse_error, log
from .cache import Invalidator
from .handles import Handles
from .localfiles import LocalFiles
from .nodes import Inodes

__all__ = ["Renames"]


class Renames:
    """Makes the renames the kernel asks for, and repoints what the mount holds (nodes, handles, its
    own files) to the new name.

    Args:
        provider: the AFI provider (``move``, or ``write`` for a file the mount held).
        call: its verbs as the mount's caller.
        inodes: the inode table.
        handles: the open handles.
        local: the files the mount holds itself.
        invalidator: what the kernel is told to forget.
    """

    def __init__(
        self,
        provider: Provider,
        call: Calls,
        inodes: Inodes,
        handles: Handles,
        local: LocalFiles,
        invalidator: Invalidator,
    ) -> None:
        self._provider = provider
        self._call = call
        self._inodes = inodes
        self._handles = handles
        self._local = local
        self._invalidator = invalidator

    async def rename(self, source: str, destination: str, *, keep: bool) -> None:
        """Move ``source`` to ``destination`` (``keep``: never over an existing one); repoint what the mount holds."""
        if keep and destination in self._local:
            raise fuse_error(errno.EEXIST)
        local = self._local.get(source)
        if local is not None:
            try:
                entry = await self._call(self._provider.write, destination, local.data, create_only=keep)
            except (InvalidPath, TooLarge, Internal) as err:
                name_refused = isinstance(err, InvalidPath) and await self._name_refused(destination)
                if not name_refused and not local.held:  # what it holds is refused (an empty note), not the name
                    log.warning("%s: not stored: %s", destination, err.message)
                    raise
                # An editor's temp file under another name the provider refuses, or a held file (its bytes
                # still refused) moved by the user: the mount keeps it under the new name, a held one on disk too.
                self._local.rename(source, destination, reason=" ".join(err.message.split()))
                await self._repoint(source, destination)
                self._invalidator.refused(destination)
                return
            self._local.pop(source)
        else:
            try:
                entry = await self._call(self._provider.move, source, destination, overwrite=not keep)
            except Unsupported:
                raise fuse_error(errno.EXDEV) from None  # not a move the provider makes: mv copies and deletes
        self._local.pop(destination)
        await self._repoint(source, destination)
        self._invalidator.stored(destination, entry)  # the source's node, moved; the kernel knows it

    async def _repoint(self, source: str, destination: str) -> None:
        await self._local.sync(source, destination)
        self._inodes.moved(source, destination)
        self._handles.repoint(source, destination)

    async def _name_refused(self, path: str) -> bool:
        """Whether the provider refuses ``path`` as a name (its ``stat`` says invalid_path, not not_found)."""
        try:
            await self._call(self._provider.stat, path)
        except InvalidPath:
            return True
        except NotFound:
            return False
        return False
