"""An :class:`~afi.clients.AfiClient` made of plain ``os`` calls on a mounted directory (``afi mount``).

It lets the conformance kit run through the FUSE binding. What a filesystem cannot express is
refused with :class:`~afi.clients.CannotExpress` (``if_match``, a page ``limit`` below 1), so those
scenarios are skipped, never faked. Paging is the client's: a directory is read whole, then cut.
Errors come back as errno and are mapped to AFI codes by :data:`CODES`; the search control file
hands back the provider's own error object, message included.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import stat as stat_mod
from pathlib import Path
from typing import Any

from ..errors import ERRNO, AfiError, InvalidPath, error_from_dict
from ..glob import Glob
from ..model import (
    DeleteResult,
    Entry,
    Manifest,
    Match,
    MatchPage,
    Page,
    ReadResult,
    SearchQuery,
    SearchRequest,
    Truncated,
    dump,
    rfc3339,
)
from ..paths import normalize
from .base import CannotExpress, as_search_request

__all__ = ["CODES", "FsClient", "code_of"]

# errno → AFI code: the inverse of ERRNO, plus what the kernel itself answers for our cases.
CODES: dict[int, str] = {
    **{value: code for code, value in ERRNO.items() if code not in ("unauthorized",)},
    errno.EROFS: "forbidden",
    errno.ENOTEMPTY: "conflict",
    errno.ENOTDIR: "invalid_path",
    errno.EISDIR: "invalid_path",
    errno.ENAMETOOLONG: "invalid_path",
}
_RENAME_NOREPLACE = 1
_AT_FDCWD = -100


def code_of(err: OSError) -> str:
    """Given an OSError from the mount, return the AFI code it stands for."""
    return CODES.get(err.errno or 0, "internal")


def _error(err: OSError, path: str) -> AfiError:
    return error_from_dict({"code": code_of(err), "message": err.strerror or str(err), "path": path})


def _skip(reason: str) -> Exception:
    return CannotExpress(f"a filesystem cannot express this: {reason}")


class FsClient:
    """The AFI verbs as ``os`` calls under ``mountpoint`` (whose root shows the AFI folder ``/``)."""

    def __init__(self, mountpoint: str | Path) -> None:
        self.mountpoint = Path(mountpoint)

    def _os(self, path: str) -> tuple[str, str]:
        """Given an AFI path, return it normalised and the host path under the mount (never outside it)."""
        if isinstance(path, str) and "\x00" in path:
            normalize(path)  # raises invalid_path
        afi = normalize(path)
        return afi, str(self.mountpoint) + (afi if afi != "/" else "")

    def manifest(self) -> Manifest:
        return Manifest.model_validate(json.loads(self.read("/.afi/manifest.json").data))

    def _entry(self, afi: str, host: str, info: os.stat_result) -> Entry:
        if stat_mod.S_ISDIR(info.st_mode):
            kind, size, content_type = "directory", 0, "inode/directory"
        else:
            kind = "symlink" if stat_mod.S_ISLNK(info.st_mode) else "file"
            size, content_type = info.st_size, self._xattr(host, "user.afi.content_type") or ""
        etag = None if kind == "directory" else self._xattr(host, "user.afi.etag")
        return Entry(
            path=afi,
            type=kind,
            size=size,
            mtime=rfc3339(info.st_mtime_ns / 1e9),
            ctime=rfc3339(info.st_ctime_ns / 1e9),
            content_type=content_type,
            etag=etag,
            target=os.readlink(host) if kind == "symlink" else None,
            attributes={"permissions": "rw" if info.st_mode & 0o200 else "r"},
        )

    @staticmethod
    def _xattr(host: str, name: str) -> str | None:
        try:
            return os.getxattr(host, name, follow_symlinks=False).decode()
        except OSError:
            return None

    def stat(self, path: str) -> Entry:
        afi, host = self._os(path)
        try:
            return self._entry(afi, host, os.lstat(host))
        except OSError as err:
            raise _error(err, afi) from None

    def list(self, path: str, *, limit: int = 1000, cursor: str | None = None, glob: str | None = None) -> Page:
        if limit < 1:
            raise _skip("a directory listing has no page limit to refuse")
        matches = Glob(glob).matches if glob else None  # the mount does not glob: the client does, as a provider would
        afi, host = self._os(path)
        try:
            names = sorted(os.listdir(host))
        except OSError as err:
            raise _error(err, afi) from None
        names = [n for n in names if (matches is None or matches(n)) and (cursor is None or n > cursor)]
        page = names[:limit]
        entries = [self.stat(f"{afi.rstrip('/')}/{name}") for name in page]
        return Page(entries=entries, next_cursor=page[-1] if len(names) > limit else None)

    def read(self, path: str, *, offset: int = 0, length: int | None = None) -> ReadResult:
        afi, host = self._os(path)
        try:
            fd = os.open(host, os.O_RDONLY)
        except OSError as err:
            raise _error(err, afi) from None
        try:
            size = os.fstat(fd).st_size
            if stat_mod.S_ISDIR(os.fstat(fd).st_mode):
                raise InvalidPath("this is a folder: list it instead of reading it", path=afi)
            want = max(0, size - offset) if length is None else length
            data = os.pread(fd, want, offset) if want else b""
        except OSError as err:
            raise _error(err, afi) from None
        finally:
            os.close(fd)
        content_type = self._xattr(host, "user.afi.content_type") or "application/octet-stream"
        return ReadResult(data=data, content_type=content_type, eof=offset + len(data) >= size, size=size)

    def search(self, request_or_query: SearchRequest | SearchQuery | dict[str, Any], **kw: Any) -> MatchPage:
        if isinstance(request_or_query, dict) and not ({"regex", "semantic"} & set(request_or_query)):
            body: dict[str, Any] = {"query": request_or_query, **kw}  # the binding judges an unknown mode
        else:
            body = dump(as_search_request(request_or_query, **kw))
        _, host = self._os("/.afi/search")
        fd = os.open(host, os.O_RDWR)
        try:
            with contextlib.suppress(OSError):  # the answer below carries the provider's error object
                os.write(fd, json.dumps(body).encode())
            chunks: list[bytes] = []
            offset = 0
            while chunk := os.pread(fd, 1 << 16, offset):
                chunks.append(chunk)
                offset += len(chunk)
        finally:
            os.close(fd)
        return _page(b"".join(chunks))

    def write(
        self,
        path: str,
        data: bytes,
        *,
        offset: int | None = None,
        append: bool = False,
        create_only: bool = False,
        if_match: str | None = None,
    ) -> Entry:
        if if_match is not None:
            raise _skip("a write conditional on an etag")
        afi, host = self._os(path)
        flags = os.O_WRONLY | os.O_CREAT
        flags |= os.O_EXCL if create_only else 0
        flags |= os.O_APPEND if append else (os.O_TRUNC if offset is None else 0)
        try:
            fd = os.open(host, flags, 0o644)
            try:
                if offset is not None and not append:
                    os.pwrite(fd, data, offset)
                else:
                    os.write(fd, data)
            finally:
                os.close(fd)  # the binding stores the file here, and answers its errno
        except OSError as err:
            raise _error(err, afi) from None
        return self.stat(afi)

    def mkdir(self, path: str, *, parents: bool = False) -> Entry:
        afi, host = self._os(path)
        try:
            if parents:
                os.makedirs(host)
            else:
                os.mkdir(host)
        except OSError as err:
            raise _error(err, afi) from None
        return self.stat(afi)

    def delete(self, path: str, *, recursive: bool = False) -> DeleteResult:
        afi, host = self._os(path)
        try:
            if not stat_mod.S_ISDIR(os.lstat(host).st_mode):
                os.unlink(host)
                return DeleteResult(deleted=1)
            if not recursive:
                os.rmdir(host)
                return DeleteResult(deleted=1)
            count = 0
            for top, dirs, files in os.walk(host, topdown=False):
                for name in files:
                    os.unlink(os.path.join(top, name))
                    count += 1
                for name in dirs:
                    os.rmdir(os.path.join(top, name))
            os.rmdir(host)
            return DeleteResult(deleted=max(1, count))
        except OSError as err:
            raise _error(err, afi) from None

    def move(self, source: str, destination: str, *, overwrite: bool = False) -> Entry:
        src, src_host = self._os(source)
        dst, dst_host = self._os(destination)
        try:
            if overwrite:
                os.rename(src_host, dst_host)
            else:
                _renameat2(src_host, dst_host, _RENAME_NOREPLACE)
        except OSError as err:
            raise _error(err, dst if err.errno == errno.EEXIST else src) from None
        return self.stat(dst)


def _renameat2(source: str, destination: str, flags: int) -> None:
    """rename(2) with flags (glibc's renameat2): RENAME_NOREPLACE refuses an existing destination."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(destination), flags) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), source)


def _page(answer: bytes) -> MatchPage:
    """Given the control file's NDJSON answer, return the page of matches (or raise its error)."""
    matches: list[Match] = []
    cursor: str | None = None
    truncated: Truncated | None = None
    for line in answer.decode("utf-8").split("\n"):
        if not line:
            break
        item = json.loads(line)
        if "error" in item:
            raise error_from_dict(item["error"])
        if "next_cursor" in item and "path" not in item:
            cursor = item["next_cursor"]
            truncated = Truncated.model_validate(item["x-truncated"]) if "x-truncated" in item else None
            continue
        matches.append(Match.model_validate(item))
    return MatchPage(matches=matches, next_cursor=cursor, x_truncated=truncated)
