"""The bytes of open files between their handles and the provider: read windows, and one ``write`` per flush.

A file opened for reading is read a window (:data:`WINDOW`) at a time. A file opened for writing is
loaded whole on first need and handed to the provider as one ``write`` when it is flushed, synced or
released, so the provider never sees half a note.
"""

from __future__ import annotations

import errno

from afi.errors import AfiError, Conflict, InvalidPath
from afi.model import Entry
from afi.provider import Provider

from .base import WHOLE_CHUNK, WINDOW, Calls, fuse_error, log
from .handles import Fetch, ReadHandle, SearchHandle, WriteHandle, render_matches
from .localfiles import LocalFiles
from .nodes import Inodes, Node

__all__ = ["Contents"]


class Contents:
    """Reads and writes of file bytes through the provider, as the mount's caller.

    Args:
        provider: the AFI provider.
        call: its verbs as the mount's caller.
        inodes: the inode table (a file's new entry is cached there; a stale one dropped).
        local: the memory-only files (their bytes are served from memory; a refused new name goes there).
    """

    def __init__(self, provider: Provider, call: Calls, inodes: Inodes, local: LocalFiles) -> None:
        self._provider = provider
        self._call = call
        self._inodes = inodes
        self._local = local

    async def read(self, handle: ReadHandle, off: int, size: int) -> bytes:
        """Given a read of a file open for reading, return its bytes: from the window, or a new one."""
        served = handle.serve(off, size)
        if served is not None:
            return served
        local = self._local.get(handle.path)
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
            result = await self._call(self._provider.read, handle.path, offset=start, length=fetch.length)
            fetch.data, fetch.eof = result.data, result.eof
            handle.window = fetch
        finally:
            handle.fetches.remove(fetch)
            fetch.done.set()
        return result.data[off - start : off - start + size]

    async def load(self, handle: WriteHandle) -> None:
        """Fill ``handle``'s buffer with the file's bytes, unless it holds them already."""
        if handle.buffer is not None:
            return
        local = self._local.get(handle.path)
        if local is not None:
            handle.buffer = bytearray(local.data)
            handle.base_etag = local.base_etag  # a held file: the version it was written over
            return
        data, handle.base_etag = await self._whole(handle.path)
        handle.buffer = bytearray(data)
        handle.appended_from = len(data) if handle.appending else None

    async def truncate(self, node: Node, size: int, handle: WriteHandle | None) -> None:
        """Cut or zero-extend ``node``'s file to ``size`` bytes: in ``handle``'s buffer, in memory, or stored."""
        if handle is not None:
            if size == 0:
                handle.buffer = bytearray()
            await self.load(handle)
            if handle.local:
                self._local.make_room(handle.path, size)
            handle.truncate(size)
        elif node.path in self._local and self._local[node.path].held:
            # a change to a held file is a rewrite of it: stored if the provider takes it now, else held
            rewrite = WriteHandle(node.ino, node.path, local=True)
            await self.load(rewrite)
            rewrite.truncate(size)
            entry = await self.commit(rewrite)
            if entry is not None:
                self._inodes.remember(node, entry)
        elif node.path in self._local:
            self._local.resize(node.path, size)
        elif size == 0:
            self._inodes.remember(node, await self._call(self._provider.write, node.path, b""))
        else:
            # read-modify-write under if_match: a write landing in between is refused, never lost
            before = await self._call(self._provider.stat, node.path)
            whole = (await self._whole(node.path))[0]
            resized = whole[:size].ljust(size, b"\x00")
            entry = await self._call(self._provider.write, node.path, resized, if_match=before.etag)
            self._inodes.remember(node, entry)

    async def commit(self, handle: WriteHandle) -> Entry | None:
        """Hand the buffered content to the provider as one ``write``; return the stored entry.

        A new file whose name the provider refuses is kept in memory instead (``None`` is returned).
        Content loaded from the store is written back only over the version it was loaded from
        (``if_match``): a write that landed meanwhile through another door is never overwritten
        unseen; this close fails with ESTALE instead, and the program can read again and retry.
        Content the provider refuses is held at its path, marked, and the refusal is raised (the
        close fails): a shell's ``>`` does not look, so the bytes must stay where the user can see
        them. Emptying a stored note is the exception: nothing was written to keep, the note stays.
        """
        data = bytes(handle.buffer or b"")
        path = handle.path
        try:
            if handle.appending and handle.appended_from is not None:
                # An append is stored as one (atomic) provider append of the new bytes: appends through
                # every door land, none is refused because another landed first.
                entry = await self._call(self._provider.write, path, data[handle.appended_from :], append=True)
                handle.buffer = handle.appended_from = None  # the next write appends to what is stored then
            else:
                entry = await self._call(self._provider.write, path, data, if_match=handle.base_etag)
        except Conflict as err:
            if handle.base_etag is None:
                raise
            handle.dirty = False
            if handle.local:  # a held file's new bytes are the only copy: hold them, and say why
                why = "the stored file changed through another door since it was read: rm this to see it, or > it"
                await self._hold(handle, data, why, err)
            log.info("%s changed since it was opened; this write is refused, not merged", path)
            self._inodes.stale(path)
            raise fuse_error(errno.ESTALE) from None
        except AfiError as err:
            handle.dirty = False  # kept in memory, or held: release does not try again
            local = self._local.get(path) if handle.local else None
            if isinstance(err, InvalidPath) and local is not None and local.reason and not local.held:
                self._local.keep(path, data, reason=err.message)  # a name the provider refuses: memory only
                return None
            handle.refused = " ".join(err.message.split())
            if data:
                await self._hold(handle, data, handle.refused, err)
            else:  # held at release, unless changed by then: a shell's `>` flushes before it writes
                handle.refused_empty = local
            raise
        if handle.local:
            self._local.pop(path)
            handle.local = False
            await self._local.sync(path)
        handle.dirty = False
        handle.base_etag = entry.etag
        return entry

    async def settle(self, handle: WriteHandle) -> None:
        """The last close of ``handle``: a file made or held through the mount whose content the provider
        refused when empty is held now, empty (``touch facts/new.md``), unless another handle stored or
        held it since; the folder on disk is brought up to date.

        Raises:
            pyfuse3.FUSEError: ENOSPC when the mount has no room left to hold it.
        """
        local = self._local.get(handle.path)
        if handle.refused_empty is not None and handle.refused_empty is local and not handle.buffer:
            assert handle.refused is not None
            self._local.hold(handle.path, b"", reason=handle.refused, base_etag=handle.base_etag)
        await self._local.sync(handle.path)

    async def _hold(self, handle: WriteHandle, data: bytes, reason: str, err: AfiError) -> None:
        """Hold ``data`` at the handle's path, marked with ``reason``, and keep it on disk.

        Raises:
            pyfuse3.FUSEError: ENOSPC when the mount has no room left to hold it.
        """
        self._local.hold(handle.path, data, reason=reason, base_etag=handle.base_etag)
        handle.local = True
        handle.refused = reason
        log.info("%s: held at its path: %s: %s", handle.path, err.code, reason)
        await self._local.sync(handle.path)

    async def search(self, handle: SearchHandle, data: bytes) -> None:
        """Add ``data`` to the search request written on ``handle``; once it is whole, search and keep the answer."""
        handle.request.extend(data)
        handle.answer, handle.base = None, None
        try:
            request = handle.parsed()
            if request is None:
                return
            page = await self._call(self._provider.search, request)
        except AfiError as err:
            handle.fail(err)
            raise
        handle.answer = render_matches(page)

    async def _whole(self, path: str) -> tuple[bytes, str | None]:
        """Given a path, return all its bytes (read in chunks, so big files load too) and the etag they were read at."""
        chunks: list[bytes] = []
        offset = 0
        etag: str | None = None
        while True:
            result = await self._call(self._provider.read, path, offset=offset, length=WHOLE_CHUNK)
            etag = etag or result.etag
            chunks.append(result.data)
            offset += len(result.data)
            if result.eof or not result.data:
                return b"".join(chunks), etag
