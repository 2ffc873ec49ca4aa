"""The FUSE binding (docs/afi.md, "FUSE"): the AFI tree as a directory, on pyfuse3 and trio.

Each kernel request becomes one provider verb run in a worker thread: getattr/lookup → ``stat``,
readdir → ``list`` (every page), read → ``read``, and at level 3 a written file → one ``write`` when
it is flushed or released, mkdir → ``mkdir``, unlink/rmdir → ``delete``, rename → ``move``. Errors map
through :data:`afi.errors.ERRNO`. ``/.afi/search`` is the search control file (per open handle).
Files made through the mount whose names the provider does not store (editors' temp files: sed's
``sedXXXXXX``, vim's ``4913``) are kept in memory until renamed onto a path it stores, within a budget
(``local_bytes``, ``local_files``: ENOSPC past it) and for ``local_idle`` seconds once closed and unused.
The inode table holds only what the kernel knows (see :mod:`afi.bindings.fuse.nodes`).
"""

from __future__ import annotations

import errno
import json
import os
import time
from collections.abc import Hashable
from typing import Any

import pyfuse3

from afi.errors import AfiError, InvalidPath, NotFound
from afi.model import Entry, dump
from afi.paths import basename, parent
from afi.provider import Caller

from .base import SEARCH_ENTRY, XATTRS, fuse_error, mapped_errors
from .files import FileOps
from .handles import DirHandle, Row, WriteHandle
from .nodes import SEARCH_PATH, Node, attributes, entry_of_local

__all__ = ["XATTRS", "AfiFS"]

_LISTINGS = 256  # cached folder listings past which the stale ones are pruned


class AfiFS(FileOps):
    """The pyfuse3 operations over one provider, as one caller (arguments: see :class:`FuseBase`)."""

    # -- names and attributes --------------------------------------------------------------

    @mapped_errors
    async def lookup(self, parent_inode: int, name: bytes, ctx: Any = None) -> pyfuse3.EntryAttributes:
        path = self._child(parent_inode, name)
        try:
            entry = await self._entry(path)
        except (NotFound, InvalidPath):  # a name the provider cannot hold does not exist (yet: see create)
            raise fuse_error(errno.ENOENT) from None
        # The node is made only now that the path exists, and counted in the same step (no await between).
        node = self.inodes.known(path)
        if node is None:
            node = self.inodes.for_path(path)
            if path != SEARCH_PATH and path not in self.locals:
                self.inodes.remember(node, entry)
        node.lookups += 1
        return self._attrs(node, entry)

    async def forget(self, inode_list: Any) -> None:
        for ino, count in inode_list:
            self.inodes.forget(ino, count)

    @mapped_errors
    async def getattr(self, inode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        node = self.inodes.node(inode)
        return self._attrs(node, await self._entry(node.path))

    @mapped_errors
    async def setattr(self, inode: int, attr: Any, fields: Any, fh: int | None, ctx: Any) -> pyfuse3.EntryAttributes:
        node = self.inodes.node(inode)
        if fields.update_size:
            await self._truncate(node, attr.st_size, fh)
        return await self.getattr(inode)

    async def _truncate(self, node: Node, size: int, fh: int | None) -> None:
        if node.path == SEARCH_PATH:
            return  # `> /.afi/search` truncates nothing: the request lives in the handle
        if size > self.max_file:
            raise fuse_error(errno.EFBIG)
        self._may_change(await self._entry(node.path))
        handle = self._handles.get(fh) if fh is not None else None
        if isinstance(handle, WriteHandle):
            if size == 0:
                handle.buffer = bytearray()
            await self._load(handle)
            if handle.local:
                self._make_room(handle.path, size)
            handle.truncate(size)
        elif node.path in self.locals:
            self._make_room(node.path, size)
            local = self.locals[node.path]
            local.data = local.data[:size].ljust(size, b"\x00")
            local.used = time.monotonic()
        else:
            if size == 0:
                entry = await self._call(self.provider.write, node.path, b"")
            else:
                # read-modify-write under if_match: a write landing in between is refused, never lost
                before = await self._call(self.provider.stat, node.path)
                whole = await self._whole(node.path)
                resized = whole[:size].ljust(size, b"\x00")
                entry = await self._call(self.provider.write, node.path, resized, if_match=before.etag)
            self.inodes.remember(node, entry)

    @mapped_errors
    async def readlink(self, inode: int, ctx: Any) -> bytes:
        entry = await self._entry(self.inodes.node(inode).path)
        if entry.type != "symlink" or not entry.target:
            raise fuse_error(errno.EINVAL)
        return os.fsencode(entry.target)

    @mapped_errors
    async def getxattr(self, inode: int, name: bytes, ctx: Any) -> bytes:
        entry = await self._entry(self.inodes.node(inode).path)
        if name == b"user.afi.content_type":
            return entry.content_type.encode()
        if name == b"user.afi.etag" and entry.etag is not None:
            return entry.etag.encode()
        if name == b"user.afi.entry":
            return json.dumps(dump(entry)).encode()
        raise fuse_error(pyfuse3.ENOATTR)

    @mapped_errors
    async def listxattr(self, inode: int, ctx: Any) -> list[bytes]:
        entry = await self._entry(self.inodes.node(inode).path)
        return [x for x in XATTRS if x != b"user.afi.etag" or entry.etag is not None]

    async def statfs(self, ctx: Any) -> pyfuse3.StatvfsData:
        data = pyfuse3.StatvfsData()
        data.f_bsize = data.f_frsize = 4096
        data.f_blocks = data.f_bfree = data.f_bavail = 1 << 24
        data.f_files = data.f_ffree = data.f_favail = 1 << 24
        data.f_namemax = 255
        return data

    # -- directories -----------------------------------------------------------------------

    def _list_all(self, caller: Caller, path: str) -> list[Entry]:
        entries: list[Entry] = []
        cursor: str | None = None
        while True:
            page = self.provider.list(caller, path, cursor=cursor)
            entries.extend(page.entries)
            cursor = page.next_cursor
            if not cursor:
                return entries

    async def _rows(self, path: str) -> tuple[Hashable, float, list[Row]]:
        """Given a folder, return the change token and time of its listing, and its children as readdir rows.

        A listing is reused while the store is unchanged. Its rows carry no inode numbers: a child gets
        its node only when readdir hands it to the kernel.
        """
        token, now = self.inodes.current_token(), time.monotonic()
        cached = self._listings.get(path)
        if self.inodes.watched and cached is not None and cached[0] == token and now - cached[1] < self.timeout:
            return cached
        rows = [(os.fsencode(basename(e.path)), e, self._row_attrs(e)) for e in await self._call(self._list_all, path)]
        if self.inodes.watched:
            if len(self._listings) >= _LISTINGS:  # a quiet store never clears them: keep the recent ones only
                recent = self._listings.items()
                self._listings = {p: c for p, c in recent if c[0] == token and now - c[1] < self.timeout}
            self._listings[path] = (token, now, rows)
        return token, now, rows

    def _row_attrs(self, entry: Entry) -> pyfuse3.EntryAttributes:
        return attributes(0, entry, read_only=self.read_only, timeout=self.timeout)

    @mapped_errors
    async def opendir(self, inode: int, ctx: Any) -> int:
        path = self.inodes.node(inode).path
        token, seen_at, rows = await self._rows(path)
        extra = [entry_of_local(p, f) for p, f in self.locals.items() if parent(p) == path and p != path]
        if path == "/.afi":
            extra.append(SEARCH_ENTRY)
        if extra:
            added = [(os.fsencode(basename(e.path)), e, self._row_attrs(e)) for e in extra]
            rows = sorted(rows + added, key=lambda row: row[0])
        return self._open(DirHandle(rows, token, seen_at))

    @mapped_errors
    async def readdir(self, fh: int, start_id: int, token: Any) -> None:
        handle = self._handle(fh)
        assert isinstance(handle, DirHandle)
        # A file being written keeps the size its writer gave it, not the stored one.
        dirty = {h.ino for h in self._handles.values() if isinstance(h, WriteHandle) and h.dirty}
        rows, inodes, listing = handle.rows, self.inodes, handle.token
        # Readdirplus: each entry handed over counts as a lookup in the kernel, as a lookup reply does.
        # A node is made for a row only as it is handed over, and dropped when it did not fit after all.
        # This loop runs once per entry of every listing (find, ls): it is kept to dictionary lookups.
        for index in range(start_id, len(rows)):
            name, entry, attr = rows[index]
            node = inodes.known(entry.path)
            made = node is None
            if node is None:
                node = inodes.for_path(entry.path)
            if node.ino in dirty:
                attr = self._attrs(node, entry)
            else:
                attr.st_ino = node.ino  # rows are shared by the handles of one listing: set just before use
            if not pyfuse3.readdir_reply(token, name, attr, index + 1):
                if made:
                    inodes.discard(node)
                return
            node.lookups += 1
            # A node already holding this listing's entry is as fresh as the listing; only others are checked.
            settled = listing is not None and node.token == listing and node.entry is not None
            if not settled and _cacheable(entry) and inodes.fresh(node) is None:
                inodes.remember(node, entry, token=listing, seen_at=handle.seen_at)

    async def releasedir(self, fh: int) -> None:
        self._close(fh)

    @mapped_errors
    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Any) -> pyfuse3.EntryAttributes:
        self._may_change()
        path = self._child(parent_inode, name)
        self._changed()
        entry = await self._call(self.provider.mkdir, path)
        node = self.inodes.for_path(path)
        self.inodes.remember(node, entry)
        node.lookups += 1
        return self._attrs(node, entry)

    @mapped_errors
    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self._may_change()
        path = self._child(parent_inode, name)
        self._changed()
        try:
            await self._call(self.provider.delete, path)
        except AfiError as err:
            if err.code == "conflict":
                raise fuse_error(errno.ENOTEMPTY) from None
            raise
        self.inodes.stale(path)

    @mapped_errors
    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self._may_change()
        path = self._child(parent_inode, name)
        self._changed()
        if self.locals.pop(path, None) is None:
            await self._call(self.provider.delete, path)
        self.inodes.stale(path)

    @mapped_errors
    async def rename(
        self, parent_old: int, name_old: bytes, parent_new: int, name_new: bytes, flags: int, ctx: Any
    ) -> None:
        self._may_change()
        if flags & pyfuse3.RENAME_EXCHANGE:
            raise fuse_error(errno.EINVAL)
        keep = bool(flags & pyfuse3.RENAME_NOREPLACE)
        source, destination = self._child(parent_old, name_old), self._child(parent_new, name_new)
        self._changed()
        local = self.locals.get(source)
        if local is not None:
            try:
                entry = await self._call(self.provider.write, destination, local.data, create_only=keep)
            except InvalidPath as err:  # still not a name the provider stores: it stays in memory
                local.reason = err.message
                local.used = time.monotonic()
                self.locals[destination] = self.locals.pop(source)
                self.inodes.moved(source, destination)
                self._repoint_handles(source, destination)
                return
            del self.locals[source]
        else:
            if keep and destination in self.locals:
                raise fuse_error(errno.EEXIST)
            entry = await self._call(self.provider.move, source, destination, overwrite=not keep)
        self.locals.pop(destination, None)
        self.inodes.moved(source, destination)
        self._repoint_handles(source, destination)
        node = self.inodes.known(destination)  # the source's node, moved; the kernel knows it
        if node is not None:
            self.inodes.remember(node, entry)
            node.page_etag = None
            self._invalidate(node.ino)


def _cacheable(entry: Entry) -> bool:
    """Whether a listed entry may stand in for a stat of its path (not the control file, not a local file)."""
    return entry.path != SEARCH_PATH and "x-local" not in entry.attributes
