"""What the mount and the kernel know of the store's entries, and keeping it in step with the store.

:class:`Entries` answers a path's entry and a folder's listing, from the inode table's cache and its
own cache of listings where they still hold, else from the provider. :class:`Invalidator` drops what
no longer holds: the listings when something changes through the mount, and the attributes and pages
the kernel keeps when a file is stored or the store changes through another door, without holding up
the request being answered.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import NamedTuple

import pyfuse3
import trio

from afi.model import Entry
from afi.paths import basename, parent
from afi.provider import Caller, Provider

from .base import SEARCH_ENTRY, Calls, not_stored_entry
from .handles import Row
from .localfiles import LocalFiles
from .nodes import CONTROL_PATHS, NOT_STORED_PATH, SEARCH_PATH, Inodes, attributes

__all__ = ["Entries", "Invalidator", "Listing", "cacheable"]

_LISTINGS = 256  # cached folder listings past which the stale ones are pruned


class Listing(NamedTuple):
    """A folder's children as readdir rows, and the change token and time they were listed under."""

    token: Hashable
    seen_at: float
    rows: list[Row]

    def holds(self, token: Hashable, now: float, timeout: float) -> bool:
        """Whether the listing may stand for the folder at ``now``, the store's change token being ``token``."""
        return self.token == token and now - self.seen_at < timeout


@dataclass
class Entries:
    """Paths' entries and folders' listings as the mount shows them.

    A folder's listing (every page of a ``list``) is reused while the store is unchanged and for
    ``timeout``; without a change token each opendir lists afresh. A listing's rows carry no inode
    numbers: a child gets its node only when readdir hands it to the kernel.
    """

    provider: Provider
    call: Calls
    inodes: Inodes
    local: LocalFiles
    read_only: bool = field(kw_only=True)
    timeout: float = field(kw_only=True)
    _cached: dict[str, Listing] = field(default_factory=dict, init=False)

    async def get(self, path: str) -> Entry:
        """Given an AFI path, return its entry: a control file, a memory-only file, cached, or ``stat``."""
        if path == SEARCH_PATH:
            return SEARCH_ENTRY
        if path == NOT_STORED_PATH:
            return not_stored_entry(len(self.local.listing()))
        local = self.local.get(path)
        if local is not None:
            return local.entry(path)
        node = self.inodes.known(path)  # never made here: a path that does not exist must leave no node
        if node is not None:
            cached = self.inodes.fresh(node)
            if cached is not None:
                return cached
        entry = await self.call(self.provider.stat, path)
        node = self.inodes.known(path)
        if node is not None:
            self.inodes.remember(node, entry)
        return entry

    def row(self, entry: Entry) -> Row:
        """Given a child's entry, return its readdir row."""
        attr = attributes(0, entry, read_only=self.read_only, timeout=self.timeout)
        return os.fsencode(basename(entry.path)), entry, attr

    async def listing(self, path: str) -> Listing:
        """Given a folder, return its listing: the cached one while it holds, else a new one."""
        token, now = self.inodes.current_token(), time.monotonic()
        cached = self._cached.get(path) if self.inodes.watched else None
        if cached is not None and cached.holds(token, now, self.timeout):
            return cached
        listing = Listing(token, now, [self.row(e) for e in await self.call(self._list_all, path)])
        if self.inodes.watched:
            if len(self._cached) >= _LISTINGS:  # a quiet store never clears them: keep the recent ones only
                recent = self._cached.items()
                self._cached = {p: c for p, c in recent if c.holds(token, now, self.timeout)}
            self._cached[path] = listing
        return listing

    def forget_listings(self) -> None:
        """The store changed: no listing holds."""
        self._cached.clear()

    def _list_all(self, caller: Caller, path: str) -> list[Entry]:
        entries: list[Entry] = []
        cursor: str | None = None
        while True:
            page = self.provider.list(caller, path, cursor=cursor)
            entries.extend(page.entries)
            cursor = page.next_cursor
            if not cursor:
                return entries


class Invalidator:
    """Drops what the mount and the kernel cached once the store changed, through the mount or another door.

    Args:
        inodes: the inode table (the kernel holds the nodes it was handed).
        entries: the listings to drop.
        local: the memory-only files (the stale ones go whenever the caches are looked over).
    """

    def __init__(self, inodes: Inodes, entries: Entries, local: LocalFiles) -> None:
        self._inodes = inodes
        self._entries = entries
        self._local = local

    async def watch(self, every: float) -> None:
        """Poll the change token every ``every`` seconds; when it moved, the kernel asks again for what it holds."""
        if not self._inodes.watched:
            return
        while True:
            await trio.sleep(every)
            self._local.sweep()
            if self._inodes.token_changed():
                self._entries.forget_listings()
                await trio.to_thread.run_sync(_invalidate_attributes, self._inodes.looked_up())

    def changed(self) -> None:
        """Something changes through the mount: listings are no longer trusted; stale memory-only files go."""
        self._entries.forget_listings()
        self._local.sweep()

    def stored(self, path: str, entry: Entry) -> None:
        """The provider stored ``path`` as ``entry``: cache it, and drop the kernel's attributes and pages of it.

        The provider may store a file otherwise than written. The attributes go at once (no page lock is
        taken), so the next open sees the stored size (an ``>>`` right after a ``>`` appends at the stored
        end). The pages go in a thread of its own that nothing waits for: dropping pages waits for their
        locks, and a page may be locked by a write(2) that is itself waiting for this file system to
        answer, so from a request handler it could deadlock the whole mount.
        """
        node = self._inodes.known(path)
        if node is None:
            return
        self._inodes.remember(node, entry)
        node.page_etag = None
        _invalidate_attributes([node.ino])
        trio.lowlevel.start_thread_soon(functools.partial(_invalidate_pages, node.ino), _ignore_outcome)

    def refused(self, path: str, *, gone: bool = False) -> None:
        """The provider refused to store ``path``: the kernel shows what is stored again (or, ``gone``: nothing)."""
        node = self._inodes.known(path)
        if node is None:
            return
        node.entry = node.page_etag = None
        _invalidate_attributes([node.ino])
        trio.lowlevel.start_thread_soon(functools.partial(_invalidate_pages, node.ino), _ignore_outcome)
        folder = self._inodes.known(parent(path))
        if gone and folder is not None:
            pyfuse3.invalidate_entry_async(folder.ino, os.fsencode(basename(path)), ignore_enoent=True)


def _invalidate_attributes(inodes: list[int]) -> None:
    for ino in inodes:
        with contextlib.suppress(OSError):  # forgotten meanwhile
            pyfuse3.invalidate_inode(ino, attr_only=True)


def _invalidate_pages(ino: int) -> None:
    with contextlib.suppress(OSError):  # the kernel does not hold it (any more)
        pyfuse3.invalidate_inode(ino, attr_only=False)


def _ignore_outcome(_outcome: object) -> None:
    """Nothing waits for a page invalidation (see :meth:`Invalidator.stored`)."""


def cacheable(entry: Entry) -> bool:
    """Whether a listed entry may stand in for a stat of its path (not the control file, not a local file)."""
    return entry.path not in CONTROL_PATHS and "x-local" not in entry.attributes
