"""The FUSE binding's shared plumbing: the provider, the caller, inodes, handles, and error mapping."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, ParamSpec, TypeVar

import pyfuse3
import trio

from afi.errors import ERRNO, AfiError, Forbidden
from afi.model import Entry
from afi.paths import is_within, join, parent
from afi.provider import Caller, Provider

from .fuse_handles import DirHandle, ReadHandle, Row, SearchHandle, WriteHandle
from .fuse_nodes import SEARCH_PATH, Inodes, LocalFile, Node, attributes, entry_of_local

__all__ = [
    "SEARCH_ENTRY",
    "WHOLE_CHUNK",
    "WINDOW",
    "XATTRS",
    "FuseBase",
    "Handle",
    "fuse_error",
    "log",
    "mapped_errors",
]

log = logging.getLogger("afi.fuse")
T = TypeVar("T")
P = ParamSpec("P")
Handle = ReadHandle | WriteHandle | SearchHandle
WINDOW = 1 << 20  # bytes fetched per provider read
WHOLE_CHUNK = 32 << 20  # bytes per read when loading a file to rewrite it
XATTRS = (b"user.afi.content_type", b"user.afi.etag", b"user.afi.entry")
SEARCH_ENTRY = Entry(
    path=SEARCH_PATH,
    type="file",
    size=0,
    mtime="1970-01-01T00:00:00.000Z",
    ctime="1970-01-01T00:00:00.000Z",
    content_type="application/x-ndjson",
    attributes={"permissions": "rw", "x-control": "search"},
)


def fuse_error(errno_value: int) -> pyfuse3.FUSEError:
    return pyfuse3.FUSEError(errno_value)


def mapped_errors(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Turn an AfiError into the errno of :data:`ERRNO`; anything unexpected is logged and EIO."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kw: P.kwargs) -> T:
        try:
            return await fn(*args, **kw)
        except pyfuse3.FUSEError:
            raise
        except AfiError as err:
            raise fuse_error(ERRNO.get(err.code, errno.EIO)) from None
        except Exception:
            log.exception("%s failed", fn.__name__)
            raise fuse_error(errno.EIO) from None

    return wrapper


def _invalidate_attributes(inodes: list[int]) -> None:
    for ino in inodes:
        with contextlib.suppress(OSError):  # forgotten meanwhile
            pyfuse3.invalidate_inode(ino, attr_only=True)


def _name(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


class FuseBase(pyfuse3.Operations):
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
    ) -> None:
        super().__init__()
        self.provider = provider
        self.caller = caller
        self.root = subtree
        self.read_only = read_only
        self.timeout = timeout
        self.inodes = Inodes(subtree, change_token)
        self.locals: dict[str, LocalFile] = {}
        self._handles: dict[int, Handle | DirHandle] = {}
        self._next_fh = 1
        self._limiter = trio.CapacityLimiter(threads)
        self._listings: dict[str, tuple[Hashable, float, list[Row]]] = {}

    async def watch(self, every: float = 0.2) -> None:
        """Poll the change token; when the store changed, make the kernel ask again for what it holds.

        This is what lets the kernel keep names and attributes for long (``timeout``) and still show a
        write made through another binding within a fraction of a second.
        """
        if not self.inodes.watched:
            return
        while True:
            await trio.sleep(every)
            if self.inodes.token_changed():
                self._listings.clear()
                inodes = self.inodes.looked_up()
                await trio.to_thread.run_sync(_invalidate_attributes, inodes)

    # -- plumbing --------------------------------------------------------------------------

    async def _call(self, verb: Callable[..., T], *args: Any, **kw: Any) -> T:
        return await trio.to_thread.run_sync(functools.partial(verb, self.caller, *args, **kw), limiter=self._limiter)

    def _open(self, handle: Handle | DirHandle) -> int:
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = handle
        return fh

    def _handle(self, fh: int) -> Handle | DirHandle:
        found = self._handles.get(fh)
        if found is None:
            raise fuse_error(errno.EBADF)
        return found

    def _child(self, parent_inode: int, name: bytes) -> str:
        path = self.inodes.node(parent_inode).path
        text = _name(name)
        if text == ".":
            return path
        if text == "..":
            return path if path == self.root else parent(path)
        return join(path, text)

    async def _entry(self, path: str) -> Entry:
        """Given an AFI path, return its entry: a control file, a memory-only file, cached, or ``stat``."""
        if path == SEARCH_PATH:
            return SEARCH_ENTRY
        local = self.locals.get(path)
        if local is not None:
            return entry_of_local(path, local)
        node = self.inodes.for_path(path)
        cached = self.inodes.fresh(node)
        if cached is not None:
            return cached
        entry = await self._call(self.provider.stat, path)
        self.inodes.remember(node, entry)
        return entry

    def _attrs(self, node: Node, entry: Entry) -> pyfuse3.EntryAttributes:
        size = None
        for handle in self._handles.values():
            if (
                isinstance(handle, WriteHandle)
                and handle.ino == node.ino
                and handle.dirty
                and handle.buffer is not None
            ):
                size = len(handle.buffer)
        return attributes(node.ino, entry, read_only=self.read_only, timeout=self.timeout, size=size)

    def _changed(self) -> None:
        """Something changed through the mount: listings are no longer trusted."""
        self._listings.clear()

    def _may_change(self, entry: Entry | None = None) -> None:
        """Refuse a change: EROFS on a read-only mount, EACCES without the write scope or on a read-only path."""
        if self.read_only:
            raise fuse_error(errno.EROFS)
        self.caller.require("afi:write")
        if entry is not None and "w" not in str(entry.attributes.get("permissions", "rw")):
            raise Forbidden("this path is read-only", path=entry.path)

    def _invalidate(self, ino: int) -> None:
        """Drop the kernel's attributes and pages of ``ino``: the provider may store it otherwise than written."""
        with contextlib.suppress(OSError):  # the kernel does not hold it
            pyfuse3.invalidate_inode(ino, attr_only=False)

    def _repoint_handles(self, source: str, destination: str) -> None:
        for handle in self._handles.values():
            if isinstance(handle, ReadHandle | WriteHandle) and is_within(handle.path, source):
                handle.path = destination + handle.path[len(source) :]
