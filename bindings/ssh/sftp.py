"""The SFTP subsystem over the AFI verbs, so ``sftp`` (get, put, ls, rename, rm, mkdir) and ``sshfs`` work.

A file opened for writing is buffered and written whole, with one ``write`` verb, when it is
closed: a refused or failed upload leaves the tree as it was. A file made under a name the provider
refuses (``sed -i``'s ``facts/sedXXXXXX``) lives in the session's memory (:mod:`.sftp_local`) until
renamed onto a name the provider stores. Each request runs its verb in a worker thread. AfiErrors
become SFTP statuses through :data:`afi.errors.ERRNO` (the FUSE map).
"""

from __future__ import annotations

import os
import posixpath
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import asyncssh
from asyncssh import SFTPAttrs, SFTPName

from afi.errors import AfiError, Forbidden, InvalidPath, NotFound, TooLarge
from afi.paths import normalize
from afi.provider import Caller, Provider

from ..offload import offload
from .sftp_local import LocalFiles
from .sftp_moves import move
from .sftp_wire import Handle, entry_attrs, file_attrs, handle_of, sftp_error

__all__ = ["DEFAULT_MAX_UPLOAD", "AfiSFTPServer"]

DEFAULT_MAX_UPLOAD = 64 * 1024 * 1024
T = TypeVar("T")


class AfiSFTPServer(asyncssh.SFTPServer):
    """An SFTP server whose files are the AFI tree of the connection's caller."""

    def __init__(
        self,
        chan: asyncssh.SSHServerChannel[bytes],
        provider: Provider,
        caller: Caller,
        max_upload: int,
        local_files: LocalFiles | None = None,
    ) -> None:
        super().__init__(chan)
        # Files open for writing exist only in their buffer until closed; stat shows them (sshfs asks).
        self._pending: dict[str, Handle] = {}
        self.provider = provider
        self.caller = caller
        self.max_upload = max_upload
        self.locals = local_files if local_files is not None else LocalFiles()

    async def _run(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        try:
            return await offload(fn, *args, **kw)
        except AfiError as err:
            raise sftp_error(err) from None

    @staticmethod
    def _path(raw: bytes) -> str:
        text = raw.decode("utf-8", "surrogateescape") or "."
        try:
            return normalize(posixpath.join("/", text))
        except AfiError as err:
            raise sftp_error(err) from None

    def format_user(self, uid: int | None) -> str:
        return self.caller.principal

    def format_group(self, gid: int | None) -> str:
        return self.caller.space

    async def realpath(self, path: bytes) -> bytes:
        return self._path(path).encode()

    async def stat(self, path: bytes) -> SFTPAttrs:
        where = self._path(path)
        pending = self._pending.get(where)
        if pending is not None:
            return await self._written_attrs(pending)
        return await self._stored_attrs(where)

    async def lstat(self, path: bytes) -> SFTPAttrs:
        return await self.stat(path)

    async def fstat(self, file_obj: object) -> SFTPAttrs:
        handle = handle_of(file_obj)
        if handle.writing:
            return await self._written_attrs(handle)
        return await self.stat(handle.path.encode())

    async def _written_attrs(self, handle: Handle) -> SFTPAttrs:
        """A file open for writing shows as stored: a note gains its front matter, and sshfs and the kernel
        keep the size a stat reports (a read right after the save stops there), so a note's text is stored
        first, as for a read. A workspace file is stored byte for byte: its size is what was written, and
        an ``ls -l`` during a copy stores nothing (a copy that then dies leaves no half file behind)."""
        note = not handle.path.startswith("/files/")
        if note and handle.dirty and handle.buffer and not handle.local and not handle.refused:
            try:
                await self._commit(handle)
            except asyncssh.SFTPError:
                handle.dirty = handle.refused = True  # half a character, say: told at close if still so
        if handle.dirty or handle.local:
            return file_attrs(len(handle.buffer), time.time())
        return await self._stored_attrs(handle.path)

    async def _stored_attrs(self, where: str) -> SFTPAttrs:
        local = self.locals.get(where)
        if local is not None:
            return file_attrs(len(local.data), local.mtime)
        try:
            entry = await offload(self.provider.stat, self.caller, where)
        except InvalidPath as err:  # a name the provider cannot hold does not exist (yet: see open), as in FUSE
            raise asyncssh.SFTPNoSuchFile(f"{where}: {err.code}: {err.message}") from None
        except AfiError as err:
            raise sftp_error(err) from None
        return entry_attrs(entry)

    async def scandir(self, path: bytes) -> AsyncIterator[SFTPName]:
        where = self._path(path)
        top = await self._run(self.provider.stat, self.caller, where)
        parent = await self._run(self.provider.stat, self.caller, posixpath.dirname(where) or "/")
        for name, entry in ((b".", top), (b"..", parent)):
            yield SFTPName(name, attrs=entry_attrs(entry))
        cursor: str | None = None
        while True:
            page = await self._run(self.provider.list, self.caller, where, cursor=cursor)
            for entry in page.entries:
                yield SFTPName(entry.path.rsplit("/", 1)[-1].encode(), attrs=entry_attrs(entry))
            if not page.next_cursor:
                break
            cursor = page.next_cursor
        self.locals.sweep(self._pending)
        for local_path, local in self.locals.in_folder(where):
            yield SFTPName(local_path.rsplit("/", 1)[-1].encode(), attrs=file_attrs(len(local.data), local.mtime))

    async def open(self, path: bytes, pflags: int, attrs: SFTPAttrs) -> object:
        where = self._path(path)
        writing = bool(pflags & (asyncssh.FXF_WRITE | asyncssh.FXF_APPEND | asyncssh.FXF_CREAT | asyncssh.FXF_TRUNC))
        if not writing:
            # sshfs sends CLOSE after the program's close() returned; a reader that comes first
            # sees what was written so far, as on a disk.
            await self.commit_pending(where)
            local = self.locals.get(where)
            if local is not None:
                return Handle(where, writing=False, buffer=bytearray(local.data), local=True)
            entry = await self._run(self.provider.stat, self.caller, where)
            if entry.type == "directory":
                raise asyncssh.SFTPFileIsADirectory(f"{where}: invalid_path: this is a folder")
            return Handle(where, writing=False)
        try:
            self.caller.require("afi:write", path=where)
        except AfiError as err:
            raise sftp_error(err) from None
        handle = Handle(where, writing=True, create_only=bool(pflags & asyncssh.FXF_EXCL))
        local = self.locals.get(where)
        exists, refused = True, ""
        if local is not None:
            handle.local = True
        else:
            try:
                await offload(self.provider.stat, self.caller, where)
            except NotFound:
                exists = False
            except InvalidPath as err:  # a name the provider refuses: the file may live in memory only
                exists, refused = False, err.message
            except AfiError as err:
                raise sftp_error(err) from None
        if exists and handle.create_only:
            raise asyncssh.SFTPFileAlreadyExists(f"{where}: conflict: the file exists")
        if not exists and not pflags & asyncssh.FXF_CREAT:
            raise asyncssh.SFTPNoSuchFile(f"{where}: not_found: no such file")
        if refused:
            await self._keep_in_memory(where, refused)
            handle.local = True
        if local is not None and not pflags & asyncssh.FXF_TRUNC:
            handle.buffer.extend(local.data)
        elif exists and not pflags & asyncssh.FXF_TRUNC:
            handle.buffer.extend(await self._read_all(where))
        else:
            handle.dirty = True  # created or truncated: written on close even when empty
        self._pending[where] = handle
        return handle

    async def _keep_in_memory(self, where: str, reason: str) -> None:
        """Make ``where``, a name the provider refuses (``reason``), a memory-only file, if its folder is writable."""
        try:
            folder = await offload(self.provider.stat, self.caller, posixpath.dirname(where))
        except AfiError:
            folder = None
        try:
            if folder is None or folder.type != "directory":
                raise InvalidPath(reason, path=where)
            if "w" not in str(folder.attributes.get("permissions", "rw")):
                raise Forbidden(f"{folder.path} is read-only", path=where)
            self.locals.check(where, 0, self._open_sizes())
        except AfiError as err:
            raise sftp_error(err) from None
        self.locals.put(where, b"", reason=reason)

    async def _read_all(self, where: str) -> bytes:
        result = await self._run(self.provider.read, self.caller, where)
        return result.data

    async def read(self, file_obj: object, offset: int, size: int) -> bytes:
        handle = handle_of(file_obj)
        if handle.writing or handle.local:
            return bytes(handle.buffer[offset : offset + size])
        result = await self._run(self.provider.read, self.caller, handle.path, offset=offset, length=size)
        return result.data

    async def write(self, file_obj: object, offset: int, data: bytes) -> int:
        handle = handle_of(file_obj)
        if not handle.writing:
            raise asyncssh.SFTPPermissionDenied(f"{handle.path}: the file was opened for reading")
        end = offset + len(data)
        if end > self.max_upload:
            raise sftp_error(TooLarge(f"an upload is at most {self.max_upload} bytes over SFTP", path=handle.path))
        if handle.local and end > len(handle.buffer):
            self._local_room(handle.path, end)
        if end > len(handle.buffer):
            handle.buffer.extend(b"\0" * (end - len(handle.buffer)))
        handle.buffer[offset:end] = data
        handle.dirty, handle.refused = True, False
        return len(data)

    async def close(self, file_obj: object) -> None:
        handle = handle_of(file_obj)
        try:
            await self._commit(handle)
        finally:
            if self._pending.get(handle.path) is handle:
                del self._pending[handle.path]

    async def fsync(self, file_obj: object) -> None:
        await self._commit(handle_of(file_obj))

    async def commit_pending(self, where: str) -> None:
        """Store what a handle open for writing on ``where`` holds and has not stored yet."""
        pending = self._pending.get(where)
        if pending is not None and pending.dirty:
            await self._commit(pending)

    async def _commit(self, handle: Handle) -> None:
        """Write a changed buffer to the provider, whole, with one ``write``."""
        if handle.writing and handle.dirty:
            handle.dirty = False
            if handle.local:
                local = self.locals.get(handle.path)
                if local is not None:  # else deleted or renamed away meanwhile
                    self.locals.put(handle.path, bytes(handle.buffer), reason=local.reason)
                return
            try:
                await self._run(self.provider.write, self.caller, handle.path, bytes(handle.buffer))
            except BaseException:
                handle.dirty = True  # not stored: the close tries again (and answers its error)
                raise

    def _open_sizes(self) -> dict[str, int]:
        """What each handle open for writing on a memory-only file holds, by path."""
        return {path: len(handle.buffer) for path, handle in self._pending.items() if handle.local}

    def _local_room(self, where: str, size: int) -> None:
        """Refuse when memory-only ``where`` growing to ``size`` bytes would pass the session's budget."""
        try:
            self.locals.check(where, size, self._open_sizes())
        except AfiError as err:
            raise sftp_error(err) from None

    async def setstat(self, path: bytes, attrs: SFTPAttrs) -> None:
        if attrs.size is None:
            return  # modes and times belong to the tree; uploads with -p still succeed
        where = self._path(path)
        self._check_size(attrs.size, where)
        pending = self._pending.get(where)
        if pending is not None:
            await self.fsetstat(pending, attrs)
            return
        local = self.locals.get(where)
        if local is not None:
            self._local_room(where, attrs.size)
            resized = local.data[: attrs.size].ljust(attrs.size, b"\0")
            self.locals.put(where, resized, reason=local.reason)
            return
        before = await self._run(self.provider.stat, self.caller, where)
        data = await self._read_all(where)
        resized = data[: attrs.size] + b"\0" * max(0, attrs.size - len(data))
        # if_match: a write that lands between the read and this one is refused, never lost
        await self._run(self.provider.write, self.caller, where, resized, if_match=before.etag)

    async def lsetstat(self, path: bytes, attrs: SFTPAttrs) -> None:
        # asyncssh's own lsetstat sets the attributes of that path on the host; the tree has no links to
        # tell apart, so it is setstat here
        await self.setstat(path, attrs)

    async def fsetstat(self, file_obj: object, attrs: SFTPAttrs) -> None:
        handle = handle_of(file_obj)
        if attrs.size is not None and handle.writing:
            self._check_size(attrs.size, handle.path)
            if handle.local:
                self._local_room(handle.path, attrs.size)
            del handle.buffer[attrs.size :]
            handle.buffer.extend(b"\0" * max(0, attrs.size - len(handle.buffer)))
            handle.dirty, handle.refused = True, False

    def _check_size(self, size: int, where: str) -> None:
        """Refuse a size no upload may reach before any buffer grows to it (a truncate to 2**63, say)."""
        if size > self.max_upload:
            raise sftp_error(TooLarge(f"a file is at most {self.max_upload} bytes over SFTP", path=where))

    async def remove(self, path: bytes) -> None:
        where = self._path(path)
        if self.locals.pop(where) is not None:
            return
        entry = await self._run(self.provider.stat, self.caller, where)
        if entry.type == "directory":
            raise asyncssh.SFTPFileIsADirectory(f"{where}: invalid_path: this is a folder (use rmdir)")
        await self._run(self.provider.delete, self.caller, where)

    async def rmdir(self, path: bytes) -> None:
        where = self._path(path)
        entry = await self._run(self.provider.stat, self.caller, where)
        if entry.type != "directory":
            raise asyncssh.SFTPNotADirectory(f"{where}: invalid_path: not a folder")
        await self._run(self.provider.delete, self.caller, where)

    async def mkdir(self, path: bytes, attrs: SFTPAttrs) -> None:
        await self._run(self.provider.mkdir, self.caller, self._path(path))

    async def rename(self, oldpath: bytes, newpath: bytes) -> None:
        await self._move(oldpath, newpath, overwrite=False)

    async def posix_rename(self, oldpath: bytes, newpath: bytes) -> None:
        await self._move(oldpath, newpath, overwrite=True)

    async def _move(self, oldpath: bytes, newpath: bytes, *, overwrite: bool) -> None:
        try:
            await move(self, self._path(oldpath), self._path(newpath), overwrite=overwrite)
        except AfiError as err:
            raise sftp_error(err) from None

    async def statvfs(self, path: bytes) -> asyncssh.SFTPVFSAttrs:
        return asyncssh.SFTPVFSAttrs(4096, 4096, 1 << 20, 1 << 19, 1 << 19, 1 << 16, 1 << 15, 1 << 15, 0, 0, 255)

    async def fstatvfs(self, file_obj: object) -> asyncssh.SFTPVFSAttrs:
        return await self.statvfs(handle_of(file_obj).path.encode())

    def open56(self, path: bytes, desired_access: int, flags: int, attrs: SFTPAttrs) -> object:
        # SFTP v5 and v6 only (this server speaks v3); asyncssh's own open56 opens a host file
        raise asyncssh.SFTPOpUnsupported("unsupported: this server speaks SFTP version 3")

    async def readlink(self, path: bytes) -> bytes:
        entry = await self._run(self.provider.stat, self.caller, self._path(path))
        if entry.type != "symlink" or not entry.target:
            raise asyncssh.SFTPInvalidParameter(f"{entry.path}: invalid_path: not a symbolic link")
        return os.fsencode(entry.target)

    async def symlink(self, oldpath: bytes, newpath: bytes) -> None:
        raise asyncssh.SFTPOpUnsupported("unsupported: symbolic links cannot be made through AFI")

    async def link(self, oldpath: bytes, newpath: bytes) -> None:
        raise asyncssh.SFTPOpUnsupported("unsupported: hard links cannot be made through AFI")
