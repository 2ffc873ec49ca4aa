"""The FUSE binding's file operations: open, read, write, create, and one provider ``write`` per flush."""

from __future__ import annotations

import errno
import os
import time
from typing import Any

import pyfuse3

from afi.errors import AfiError, Conflict, InvalidPath, NotFound
from afi.model import Entry

from .base import WHOLE_CHUNK, WINDOW, FuseBase, fuse_error, log, mapped_errors
from .handles import Fetch, ReadHandle, SearchHandle, WriteHandle, render_matches
from .nodes import SEARCH_PATH, LocalFile, Node, entry_of_local

__all__ = ["FileOps"]


class FileOps(FuseBase):
    """Files: read windows, whole-file write buffers, and the search control file."""

    @mapped_errors
    async def open(self, inode: int, flags: int, ctx: Any) -> pyfuse3.FileInfo:
        node = self.inodes.node(inode)
        if node.path == SEARCH_PATH:
            return pyfuse3.FileInfo(fh=self._open(SearchHandle()), direct_io=True)
        if flags & os.O_ACCMODE != os.O_RDONLY:
            # direct_io: this descriptor's reads come from its own buffer, the version its write will be
            # stored over (if_match), never from pages another descriptor wrote and may not store
            return pyfuse3.FileInfo(fh=await self._open_for_write(node, flags), direct_io=True)
        entry = await self._entry(node.path)
        if node.path not in self.locals and self.inodes.fresh(node) is None:
            entry = await self._call(self.provider.stat, node.path)
            self.inodes.remember(node, entry)
        keep = entry.etag is not None and entry.etag == node.page_etag and node.path not in self.locals
        node.page_etag = entry.etag
        return pyfuse3.FileInfo(fh=self._open(ReadHandle(inode, node.path)), keep_cache=keep)

    async def _open_for_write(self, node: Node, flags: int) -> int:
        self._may_change(await self._entry(node.path))
        return self._write_handle(node, flags)

    def _write_handle(self, node: Node, flags: int) -> int:
        handle = WriteHandle(node.ino, node.path, local=node.path in self.locals)
        if flags & os.O_TRUNC:
            handle.buffer, handle.dirty = bytearray(), True
        else:
            handle.appending = bool(flags & os.O_APPEND) and not handle.local
        node.page_etag = None
        return self._open(handle)

    @mapped_errors
    async def create(
        self, parent_inode: int, name: bytes, mode: int, flags: int, ctx: Any
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        path = self._child(parent_inode, name)
        self._may_change(await self._entry(self.inodes.node(parent_inode).path))
        refused: InvalidPath | None = None
        try:
            existing: Entry | None = await self._entry(path)
        except NotFound:
            existing = None
        except InvalidPath as err:  # a name the provider cannot store: the file will live in memory only
            existing, refused = None, err
        # No await from here on: the node is made, handed to the kernel and counted in one go.
        if existing is not None:
            if flags & os.O_EXCL:
                raise fuse_error(errno.EEXIST)
            self._may_change(existing)
            node = self.inodes.for_path(path)
            fh = self._write_handle(node, flags)
        else:
            reason = refused.message if refused is not None else ""
            if refused is not None:
                self._make_room(path, 0, reason=reason)
            self._changed()
            self.locals[path] = LocalFile(reason=reason)
            existing = entry_of_local(path, self.locals[path])
            node = self.inodes.for_path(path)
            fh = self._open(WriteHandle(node.ino, path, buffer=bytearray(), dirty=True, local=True))
        node.lookups += 1
        return pyfuse3.FileInfo(fh=fh, direct_io=True), self._attrs(node, existing)

    @mapped_errors
    async def read(self, fh: int, off: int, size: int) -> bytes:
        handle = self._handle(fh)
        if isinstance(handle, SearchHandle):
            return handle.read(off, size)
        if isinstance(handle, WriteHandle):
            await self._load(handle)
            assert handle.buffer is not None
            return bytes(handle.buffer[off : off + size])
        assert isinstance(handle, ReadHandle)
        served = handle.serve(off, size)
        if served is not None:
            return served
        local = self.locals.get(handle.path)
        if local is not None:
            return local.data[off : off + size]
        for fetch in list(handle.fetches):
            if fetch.covers(off):
                await fetch.done.wait()
                served = fetch.serve(off, size)
                if served is not None:
                    return served
        # Windows start on WINDOW boundaries, so reads in one window share its fetch in whatever order they come.
        start = off - off % WINDOW
        fetch = Fetch(start, max(WINDOW, off + size - start))
        handle.fetches.append(fetch)
        try:
            result = await self._call(self.provider.read, handle.path, offset=start, length=fetch.length)
            fetch.data, fetch.eof = result.data, result.eof
            handle.window = fetch
        finally:
            handle.fetches.remove(fetch)
            fetch.done.set()
        return result.data[off - start : off - start + size]

    @mapped_errors
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        handle = self._handle(fh)
        if isinstance(handle, SearchHandle):
            await self._search(handle, buf)
            return len(buf)
        if not isinstance(handle, WriteHandle):
            raise fuse_error(errno.EBADF)
        if off + len(buf) > self.max_file:
            raise fuse_error(errno.EFBIG)
        await self._load(handle)
        assert handle.buffer is not None
        if handle.appending:
            off = len(handle.buffer)  # O_APPEND: the end of what is stored, whatever size the kernel cached
        if handle.local:
            if off + len(buf) > len(handle.buffer):
                self._make_room(handle.path, off + len(buf))
            local = self.locals.get(handle.path)
            if local is not None:
                local.used = time.monotonic()
        handle.put(off, buf)
        return len(buf)

    async def _search(self, handle: SearchHandle, data: bytes) -> None:
        handle.request.extend(data)
        handle.answer, handle.base = None, None
        try:
            request = handle.parsed()
            if request is None:
                return
            page = await self._call(self.provider.search, request)
        except AfiError as err:
            handle.fail(err)
            raise
        handle.answer = render_matches(page)

    async def _whole(self, path: str) -> bytes:
        """Given a path, return all its bytes (read in chunks, so big workspace files load too)."""
        return (await self._whole_version(path))[0]

    async def _whole_version(self, path: str) -> tuple[bytes, str | None]:
        """Given a path, return all its bytes and the etag of the version they were read from."""
        chunks: list[bytes] = []
        offset = 0
        etag: str | None = None
        while True:
            result = await self._call(self.provider.read, path, offset=offset, length=WHOLE_CHUNK)
            etag = etag or result.etag
            chunks.append(result.data)
            offset += len(result.data)
            if result.eof or not result.data:
                return b"".join(chunks), etag

    async def _load(self, handle: WriteHandle) -> None:
        if handle.buffer is not None:
            return
        local = self.locals.get(handle.path)
        if local is not None:
            handle.buffer = bytearray(local.data)
            return
        data, handle.base_etag = await self._whole_version(handle.path)
        handle.buffer = bytearray(data)
        handle.appended_from = len(data) if handle.appending else None

    async def _commit(self, handle: WriteHandle) -> None:
        """Hand the buffered content to the provider as one ``write``; keep a refused new name in memory.

        Content loaded from the store is written back only over the version it was loaded from
        (``if_match``): a write that landed meanwhile through another door is never overwritten
        unseen; this close fails with ESTALE instead, and the program can read again and retry.
        """
        data = bytes(handle.buffer or b"")
        path = handle.path
        self._changed()
        try:
            if handle.appending and handle.appended_from is not None:
                # An append is stored as one (atomic) provider append of the new bytes: appends through
                # every door land, none is refused because another landed first.
                entry = await self._call(self.provider.write, path, data[handle.appended_from :], append=True)
                handle.buffer = handle.appended_from = None  # the next write appends to what is stored then
            else:
                entry = await self._call(self.provider.write, path, data, if_match=handle.base_etag)
        except Conflict:
            if handle.base_etag is None:
                raise
            handle.dirty = False
            log.info("%s changed since it was opened; this write is refused, not merged", path)
            self.inodes.stale(path)
            raise fuse_error(errno.ESTALE) from None
        except InvalidPath as err:
            if not handle.local:
                raise
            try:
                self._make_room(path, len(data), reason=err.message)
            except pyfuse3.FUSEError:
                handle.dirty = False  # refused once; release does not try again
                local = self.locals.get(path)
                if local is not None and not local.reason:
                    del self.locals[path]  # nothing half-made stays behind
                    self.inodes.stale(path)
                raise
            self.locals[path] = LocalFile(data, reason=err.message)
            handle.dirty = False
            log.info("%s is kept in memory only: %s", path, err.message)
            return
        except AfiError:
            if handle.local:
                self.locals.pop(path, None)  # nothing half-made stays behind
                self.inodes.stale(path)
            raise
        if handle.local:
            self.locals.pop(path, None)
            handle.local = False
        handle.dirty = False
        handle.base_etag = entry.etag
        node = self.inodes.known(path)
        if node is not None:
            self.inodes.remember(node, entry)
            node.page_etag = None
            self._invalidate(node.ino)

    @mapped_errors
    async def flush(self, fh: int) -> None:
        handle = self._handle(fh)
        if isinstance(handle, WriteHandle) and handle.dirty:
            await self._commit(handle)

    @mapped_errors
    async def fsync(self, fh: int, datasync: bool) -> None:
        await self.flush(fh)

    async def release(self, fh: int) -> None:
        handle = self._handles.get(fh)
        try:
            if isinstance(handle, WriteHandle) and handle.dirty:
                try:
                    await self._commit(handle)
                except AfiError as err:
                    log.warning("%s: %s: the last write could not be stored: %s", handle.path, err.code, err.message)
                except pyfuse3.FUSEError:
                    pass  # ENOSPC, logged where it was decided
        finally:
            self._close(fh)
