"""A node's attributes as the kernel sees them, and what ``setattr`` may change: a file's size
(truncate), and the mode, which is the tree's; with who may change anything through the mount.

A mode is what the tree gives (0644, 0444 where read-only; folders 0755 or 0555): asking for the mode
shown changes nothing and succeeds (``cp -p``, ``install -m 644``), any other is EPERM, never a 0 for a
change not made. This holds for the workspace files under ``/files`` too: AFI has no verb that sets a
mode, so the mount cannot apply one.
"""

from __future__ import annotations

import errno
import stat

import pyfuse3

from afi.errors import Forbidden
from afi.model import Entry
from afi.provider import Caller

from .base import fuse_error, log
from .cache import Entries
from .files import Contents
from .handles import Handles, WriteHandle
from .nodes import SEARCH_PATH, Node, attributes

__all__ = ["Attributes", "Changes"]


class Changes:
    """Who may change what through the mount: nothing on a read-only mount, else what the caller's
    scopes and each path's permissions allow.

    Args:
        caller: who the mount acts as.
        read_only: every change is refused (EROFS).
    """

    def __init__(self, caller: Caller, *, read_only: bool) -> None:
        self.read_only = read_only
        self._caller = caller

    def check(self, entry: Entry | None = None) -> None:
        """Refuse a change (of ``entry`` when given): EROFS on a read-only mount, EACCES without the
        write scope or on a read-only path."""
        if self.read_only:
            raise fuse_error(errno.EROFS)
        self._caller.require("afi:write")
        if entry is not None and "w" not in str(entry.attributes.get("permissions", "rw")):
            raise Forbidden("this path is read-only", path=entry.path)


class Attributes:
    """A node's attributes (``stat``) and the changes ``setattr`` makes to them.

    Args:
        handles: the open handles (a file being written shows the size its writer gave it).
        entries: the entries the kernel asks about.
        contents: file bytes (a truncate cuts or extends them).
        changes: who may change what.
        timeout: seconds the kernel may trust an answer.
        max_file: the most bytes a file may hold (a truncate past it is EFBIG).
    """

    def __init__(
        self, handles: Handles, entries: Entries, contents: Contents, changes: Changes, *, timeout: float, max_file: int
    ) -> None:
        self._handles = handles
        self._entries = entries
        self._contents = contents
        self._changes = changes
        self._timeout = timeout
        self._max_file = max_file

    def of(self, node: Node, entry: Entry) -> pyfuse3.EntryAttributes:
        """Given a node and its entry, return the attributes the kernel is told."""
        size = self._handles.buffered_size(node.ino)
        return attributes(node.ino, entry, read_only=self._changes.read_only, timeout=self._timeout, size=size)

    async def change_mode(self, node: Node, mode: int) -> None:
        """chmod: succeed for the mode shown; refuse any other (EPERM; EROFS on a read-only mount)."""
        shown = self.of(node, await self._entries.get(node.path)).st_mode
        if stat.S_IMODE(mode) != stat.S_IMODE(shown):
            self._changes.check()
            log.info("%s: chmod %o refused: modes are the tree's, not set through the mount", node.path, mode & 0o7777)
            raise fuse_error(errno.EPERM)

    async def truncate(self, node: Node, size: int, fh: int | None) -> None:
        """Cut or zero-extend ``node``'s file to ``size`` bytes (in the open handle ``fh``'s buffer when given)."""
        if node.path == SEARCH_PATH:
            return  # `> /.afi/search` truncates nothing: the request lives in the handle
        if size > self._max_file:
            raise fuse_error(errno.EFBIG)
        self._changes.check(await self._entries.get(node.path))
        handle = self._handles.get(fh) if fh is not None else None
        await self._contents.truncate(node, size, handle if isinstance(handle, WriteHandle) else None)
