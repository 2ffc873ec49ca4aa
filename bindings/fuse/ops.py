"""The FUSE binding (docs/afi.md, "FUSE"): the AFI tree as a directory, on pyfuse3 and trio.

Each kernel request becomes one provider verb run in a worker thread: getattr/lookup → ``stat``,
readdir → ``list`` (every page), read → ``read``, and at level 3 a written file → one ``write`` when
it is flushed or released, mkdir → ``mkdir``, unlink/rmdir → ``delete``, rename → ``move``. Errors map
through :data:`afi.errors.ERRNO`. ``/.afi/search`` is the search control file (per open handle),
``/.afi/not-stored`` lists the held files. A name that is not UTF-8 is refused where it would be made
(EILSEQ); symlinks, hard links and special files are EPERM.

:class:`AfiFS` answers the requests; the state lives in its parts: the inode table (:mod:`.nodes`), the
open handles (:mod:`.handles`), the files the mount holds itself (:mod:`.localfiles`: editors' temp
files under names the provider refuses, and held files, whose content it refused at close, kept on
disk by :mod:`.held`), entries, listings and their invalidation (:mod:`.cache`), file bytes to and
from the provider (:mod:`.files`), stored at flush and close (:mod:`.stores`), attributes and who may
change what (:mod:`.setattrs`), and renames (:mod:`.moves`).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Hashable
from typing import Any

import pyfuse3

from afi.errors import AfiError, InvalidPath, NotFound, Unsupported
from afi.model import Entry
from afi.provider import Caller, Provider

from .base import SEARCH_ENTRY, XATTRS, Calls, file_cap, fuse_error, mapped_errors
from .cache import Entries, Invalidator, cacheable
from .files import Contents
from .handles import DirHandle, Handles, ReadHandle, SearchHandle, TextHandle, WriteHandle
from .held import HeldFolder
from .localfiles import LOCAL_BYTES, LOCAL_FILES, LOCAL_IDLE, LocalFiles
from .moves import Renames
from .nodes import CONTROL_PATHS, NOT_STORED_PATH, SEARCH_PATH, Inodes, filesystem_stats, xattrs
from .setattrs import Attributes, Changes
from .stores import Stores

__all__ = ["XATTRS", "AfiFS"]


class AfiFS(pyfuse3.Operations):
    """The pyfuse3 operations over one provider, as one caller.

    Args:
        provider: the AFI provider.
        caller: who the mount acts as (``provider.authenticate`` of the mount's token).
        subtree: the AFI folder the mount's root shows.
        read_only: refuse every change with EROFS (searching stays allowed).
        timeout: seconds the kernel may trust names and attributes.
        change_token: returns a value that changes whenever the store does; entries are then
            cached until it changes instead of for half a second.
        threads: provider calls running at once.
        local_bytes: bytes the memory-only files (names the provider refuses) may hold together.
        local_files: how many memory-only files there may be.
        local_idle: seconds a memory-only file may stay closed and unused before it is dropped.
        held: where the files whose content the store refused are kept on disk too, so they show
            again after a restart (``None``: in memory only).
    """

    supports_dot_lookup = True
    enable_writeback_cache = False

    def __init__(
        self,
        provider: Provider,
        caller: Caller,
        *,
        subtree: str = "/",
        read_only: bool = False,
        timeout: float = 1.0,
        change_token: Callable[[], Hashable] | None = None,
        threads: int = 4,
        local_bytes: int = LOCAL_BYTES,
        local_files: int = LOCAL_FILES,
        local_idle: float = LOCAL_IDLE,
        held: HeldFolder | None = None,
    ) -> None:
        super().__init__()
        self.provider = provider
        self.caller = caller
        self.read_only = read_only
        self.timeout = timeout
        self.max_file = file_cap(provider)
        self.call = Calls(caller, threads)
        self.inodes = Inodes(subtree, change_token)
        self.handles = Handles(self.inodes)
        self.locals = LocalFiles(
            self.handles, self.inodes, max_bytes=local_bytes, max_files=local_files, idle=local_idle, folder=held
        )
        self.entries = Entries(provider, self.call, self.inodes, self.locals, read_only=read_only, timeout=timeout)
        self.invalidator = Invalidator(self.inodes, self.entries, self.locals)
        self.contents = Contents(provider, self.call, self.inodes, self.locals)
        self.changes = Changes(caller, read_only=read_only)
        self.attributes = Attributes(
            self.handles, self.entries, self.contents, self.changes, timeout=timeout, max_file=self.max_file
        )
        self.stores = Stores(self.contents, self.locals, self.invalidator)
        self.renames = Renames(provider, self.call, self.inodes, self.handles, self.locals, self.invalidator)

    async def watch(self, every: float = 0.2) -> None:
        """Poll the change token; when the store changed, make the kernel ask again for what it holds.

        This is what lets the kernel keep names and attributes for long (``timeout``) and still show a
        write made through another binding within a fraction of a second.
        """
        await self.invalidator.watch(every)

    # -- names and attributes --------------------------------------------------------------

    @mapped_errors
    async def lookup(self, parent_inode: int, name: bytes, ctx: Any = None) -> pyfuse3.EntryAttributes:
        path = self.inodes.child(parent_inode, name)
        try:
            entry = await self.entries.get(path)
        except (NotFound, InvalidPath):  # a name the provider cannot hold does not exist (yet: see create)
            raise fuse_error(errno.ENOENT) from None
        # The node is made only now that the path exists, and counted in the same step (no await between).
        node = self.inodes.known(path)
        if node is None:
            node = self.inodes.for_path(path)
            if path not in CONTROL_PATHS and path not in self.locals:
                self.inodes.remember(node, entry)
        node.lookups += 1
        return self.attributes.of(node, entry)

    async def forget(self, inode_list: Any) -> None:
        for ino, count in inode_list:
            self.inodes.forget(ino, count)

    @mapped_errors
    async def getattr(self, inode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        node = self.inodes.node(inode)
        return self.attributes.of(node, await self.entries.get(node.path))

    @mapped_errors
    async def setattr(self, inode: int, attr: Any, fields: Any, fh: int | None, ctx: Any) -> pyfuse3.EntryAttributes:
        node = self.inodes.node(inode)
        if fields.update_mode:
            await self.attributes.change_mode(node, attr.st_mode)
        if fields.update_size:
            await self.attributes.truncate(node, attr.st_size, fh)
        return await self.getattr(inode)

    @mapped_errors
    async def readlink(self, inode: int, ctx: Any) -> bytes:
        entry = await self.entries.get(self.inodes.node(inode).path)
        if entry.type != "symlink" or not entry.target:
            raise fuse_error(errno.EINVAL)
        return os.fsencode(entry.target)

    @mapped_errors
    async def getxattr(self, inode: int, name: bytes, ctx: Any) -> bytes:
        value = xattrs(await self.entries.get(self.inodes.node(inode).path)).get(name)
        if value is None:
            raise fuse_error(pyfuse3.ENOATTR)
        return value

    @mapped_errors
    async def listxattr(self, inode: int, ctx: Any) -> list[bytes]:
        return list(xattrs(await self.entries.get(self.inodes.node(inode).path)))

    async def statfs(self, ctx: Any) -> pyfuse3.StatvfsData:
        return filesystem_stats()

    # -- directories -----------------------------------------------------------------------

    @mapped_errors
    async def opendir(self, inode: int, ctx: Any) -> int:
        path = self.inodes.node(inode).path
        token, seen_at, rows = await self.entries.listing(path)
        extra = self.locals.entries_in(path)
        if path == "/.afi":
            extra += [SEARCH_ENTRY, await self.entries.get(NOT_STORED_PATH)]
        if extra:
            # a file the mount holds stands in for what is stored under its name
            mine = {self.entries.row(e)[0]: self.entries.row(e) for e in extra}
            rows = sorted([row for row in rows if row[0] not in mine] + list(mine.values()), key=lambda row: row[0])
        return self.handles.open(DirHandle(rows, token, seen_at))

    @mapped_errors
    async def readdir(self, fh: int, start_id: int, token: Any) -> None:
        handle = self.handles[fh]
        assert isinstance(handle, DirHandle)
        # A file being written keeps the size its writer gave it, not the stored one.
        dirty = self.handles.dirty()
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
                attr = self.attributes.of(node, entry)
            else:
                attr.st_ino = node.ino  # rows are shared by the handles of one listing: set just before use
            if not pyfuse3.readdir_reply(token, name, attr, index + 1):
                if made:
                    inodes.discard(node)
                return
            node.lookups += 1
            # A node already holding this listing's entry is as fresh as the listing; only others are checked.
            settled = listing is not None and node.token == listing and node.entry is not None
            if not settled and cacheable(entry) and inodes.fresh(node) is None:
                inodes.remember(node, entry, token=listing, seen_at=handle.seen_at)

    async def releasedir(self, fh: int) -> None:
        self.handles.close(fh)

    @mapped_errors
    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Any) -> pyfuse3.EntryAttributes:
        self.changes.check()
        path = self.inodes.new_child(parent_inode, name)
        self.invalidator.changed()
        try:
            entry = await self.call(self.provider.mkdir, path)
        except Unsupported:  # no folders there (/facts is flat): not permitted, rather than "not implemented"
            raise fuse_error(errno.EPERM) from None
        node = self.inodes.for_path(path)
        self.inodes.remember(node, entry)
        node.lookups += 1
        return self.attributes.of(node, entry)

    @mapped_errors
    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self.changes.check()
        path = self.inodes.child(parent_inode, name)
        self.invalidator.changed()
        try:
            await self.call(self.provider.delete, path)
        except AfiError as err:
            if err.code == "conflict":
                raise fuse_error(errno.ENOTEMPTY) from None
            raise
        self.inodes.stale(path)

    @mapped_errors
    async def unlink(self, parent_inode: int, name: bytes, ctx: Any) -> None:
        self.changes.check()
        path = self.inodes.child(parent_inode, name)
        self.invalidator.changed()
        if self.locals.pop(path) is None:
            await self.call(self.provider.delete, path)
        else:  # a held file goes; what is stored under its name (if anything) shows again
            await self.locals.sync(path)
            self.invalidator.refused(path)
        self.inodes.stale(path)

    @mapped_errors
    async def rename(
        self, parent_old: int, name_old: bytes, parent_new: int, name_new: bytes, flags: int, ctx: Any
    ) -> None:
        self.changes.check()
        if flags & pyfuse3.RENAME_EXCHANGE:
            raise fuse_error(errno.EINVAL)
        source = self.inodes.child(parent_old, name_old)
        destination = self.inodes.new_child(parent_new, name_new)
        self.invalidator.changed()
        await self.renames.rename(source, destination, keep=bool(flags & pyfuse3.RENAME_NOREPLACE))

    @mapped_errors
    async def symlink(self, parent_inode: int, name: bytes, target: bytes, ctx: Any) -> pyfuse3.EntryAttributes:
        """No symlinks: AFI has no verb that makes one (and the jail refuses them). EPERM, as symlink(2)
        answers where the file system does not support them."""
        self.inodes.new_child(parent_inode, name)
        self.changes.check()
        raise fuse_error(errno.EPERM)

    @mapped_errors
    async def link(self, inode: int, parent_inode: int, name: bytes, ctx: Any) -> pyfuse3.EntryAttributes:
        """No hard links: one AFI path is one file. EPERM, as link(2) answers where they are not supported."""
        self.inodes.new_child(parent_inode, name)
        self.changes.check()
        raise fuse_error(errno.EPERM)

    @mapped_errors
    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: Any) -> pyfuse3.EntryAttributes:
        """Only regular files and folders: a FIFO, socket or device node is EPERM, as mknod(2) answers."""
        self.inodes.new_child(parent_inode, name)
        self.changes.check()
        raise fuse_error(errno.EPERM)

    # -- files -----------------------------------------------------------------------------

    @mapped_errors
    async def open(self, inode: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        node = self.inodes.node(inode)
        if node.path == SEARCH_PATH:
            return pyfuse3.FileInfo(fh=self.handles.open(SearchHandle()), direct_io=True)
        if node.path == NOT_STORED_PATH:
            if flags & os.O_ACCMODE != os.O_RDONLY:
                self.changes.check(await self.entries.get(node.path))
            return pyfuse3.FileInfo(fh=self.handles.open(TextHandle(self.locals.listing())), direct_io=True)
        if flags & os.O_ACCMODE != os.O_RDONLY:
            # direct_io: this descriptor's reads come from its own buffer, the version its write will be
            # stored over (if_match), never from pages another descriptor wrote and may not store
            self.changes.check(await self.entries.get(node.path))
            return pyfuse3.FileInfo(
                fh=self.handles.open_for_write(node, flags, local=node.path in self.locals), direct_io=True
            )
        entry = await self.entries.get(node.path)
        if node.path not in self.locals and self.inodes.fresh(node) is None:
            entry = await self.call(self.provider.stat, node.path)
            self.inodes.remember(node, entry)
        keep = entry.etag is not None and entry.etag == node.page_etag and node.path not in self.locals
        node.page_etag = entry.etag
        return pyfuse3.FileInfo(fh=self.handles.open(ReadHandle(inode, node.path)), keep_cache=keep)

    @mapped_errors
    async def create(
        self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: Any
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        path = self.inodes.new_child(parent_inode, name)
        self.changes.check(await self.entries.get(self.inodes.node(parent_inode).path))
        refused: InvalidPath | None = None
        try:
            existing: Entry | None = await self.entries.get(path)
        except NotFound:
            existing = None
        except InvalidPath as err:  # a name the provider cannot store: the file will live in memory only
            existing, refused = None, err
        # No await from here on: the node is made, handed to the kernel and counted in one go.
        if existing is not None:
            if flags & os.O_EXCL:
                raise fuse_error(errno.EEXIST)
            self.changes.check(existing)
            node = self.inodes.for_path(path)
            fh = self.handles.open_for_write(node, flags, local=node.path in self.locals)
        else:
            reason = refused.message if refused is not None else ""
            if refused is not None:
                self.locals.make_room(path, 0, reason=reason)
            self.invalidator.changed()
            existing = self.locals.add(path, reason=reason).entry(path)
            node = self.inodes.for_path(path)
            fh = self.handles.open(WriteHandle(node.ino, path, buffer=bytearray(), dirty=True, local=True))
        node.lookups += 1
        return pyfuse3.FileInfo(fh=fh, direct_io=True), self.attributes.of(node, existing)

    @mapped_errors
    async def read(self, fh: int, off: int, size: int) -> bytes:
        handle = self.handles[fh]
        if isinstance(handle, SearchHandle | TextHandle):
            return handle.read(off, size)
        if isinstance(handle, WriteHandle):
            await self.contents.load(handle)
            assert handle.buffer is not None
            return bytes(handle.buffer[off : off + size])
        assert isinstance(handle, ReadHandle)
        return await self.contents.read(handle, off, size)

    @mapped_errors
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        handle = self.handles[fh]
        if isinstance(handle, SearchHandle):
            await self.contents.search(handle, buf)
            return len(buf)
        if not isinstance(handle, WriteHandle):
            raise fuse_error(errno.EBADF)
        if off + len(buf) > self.max_file:
            raise fuse_error(errno.EFBIG)
        await self.contents.load(handle)
        assert handle.buffer is not None
        if handle.appending:
            off = len(handle.buffer)  # O_APPEND: the end of what is stored, whatever size the kernel cached
        if handle.local:
            if off + len(buf) > len(handle.buffer):
                self.locals.make_room(handle.path, off + len(buf))
            self.locals.touch(handle.path)
        handle.put(off, buf)
        return len(buf)

    @mapped_errors
    async def flush(self, fh: int) -> None:
        handle = self.handles[fh]
        if isinstance(handle, WriteHandle) and handle.dirty:
            await self.stores.commit(handle)

    @mapped_errors
    async def fsync(self, fh: int, datasync: bool) -> None:
        await self.flush(fh)

    async def release(self, fh: int) -> None:
        handle = self.handles.get(fh)
        try:
            if isinstance(handle, WriteHandle):
                await self.stores.close(handle)
        finally:
            closed = self.handles.close(fh)
            if isinstance(closed, ReadHandle | WriteHandle):
                self.locals.touch(closed.path)  # a memory-only file's idle time starts when it is closed
