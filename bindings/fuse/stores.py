"""Storing what a file open for writing holds: at flush, fsync and the last close, with the kernel told
what changed, and the reason said when the provider refused it."""

from __future__ import annotations

import contextlib

import pyfuse3

from afi.errors import AfiError

from .base import log
from .cache import Invalidator
from .files import Contents
from .handles import WriteHandle
from .localfiles import LocalFiles

__all__ = ["Stores"]


class Stores:
    """Stores a write handle's bytes through :class:`~.files.Contents`, and keeps the kernel's view in step.

    Args:
        contents: file bytes to and from the provider.
        local: the files the mount holds itself (a refused file may stay held there).
        invalidator: what the kernel is told to forget.
    """

    def __init__(self, contents: Contents, local: LocalFiles, invalidator: Invalidator) -> None:
        self._contents = contents
        self._local = local
        self._invalidator = invalidator

    async def commit(self, handle: WriteHandle) -> None:
        """Store what ``handle`` holds (see :meth:`Contents.commit`).

        Raises:
            AfiError: the provider refused it.
            pyfuse3.FUSEError: ENOSPC, the mount holding too much already.
        """
        self._invalidator.changed()
        path = handle.path
        try:
            entry = await self._contents.commit(handle)
        except (AfiError, pyfuse3.FUSEError):
            self._invalidator.refused(path)
            raise
        if entry is not None:
            self._invalidator.stored(path, entry)

    async def close(self, handle: WriteHandle) -> None:
        """The release of ``handle``: store what is still unstored, and say in the log what was not and why."""
        if handle.dirty:
            try:
                await self.commit(handle)
            except AfiError as err:
                if handle.refused is None:  # else said just below
                    log.warning("%s: %s: the last write was not stored: %s", handle.path, err.code, err.message)
            except pyfuse3.FUSEError:
                pass  # ENOSPC, logged where it was decided
        await self._settle(handle)

    async def _settle(self, handle: WriteHandle) -> None:
        """The last close of a file: when the provider refused what it holds, say why, and where it is held."""
        with contextlib.suppress(pyfuse3.FUSEError):  # ENOSPC, logged where it was decided
            await self._contents.settle(handle)
        if handle.refused is None:
            return
        if handle.path in self._local:
            log.warning("%s: not stored: %s (held at its path until rewritten or removed)", handle.path, handle.refused)
            self._invalidator.refused(handle.path)
        else:
            log.warning("%s: not stored: %s", handle.path, handle.refused)
            self._invalidator.refused(handle.path, gone=handle.local)  # a new file not held: gone
