"""The FUSE binding's shared plumbing: the provider, the caller, inodes, handles, and error mapping."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import time
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, ParamSpec, TypeVar

import anyio
import pyfuse3
import trio

from afi.errors import ERRNO, AfiError, Forbidden
from afi.model import Entry
from afi.paths import is_within, join, parent
from afi.provider import Caller, Provider

from ..offload import offload
from .handles import DirHandle, ReadHandle, Row, SearchHandle, WriteHandle
from .nodes import SEARCH_PATH, Inodes, LocalFile, Node, attributes, entry_of_local

__all__ = [
    "LOCAL_BYTES",
    "LOCAL_FILES",
    "LOCAL_IDLE",
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
MAX_FILE = 1 << 30  # the most a file may hold through the mount when the manifest names no file_max_bytes
XATTRS = (b"user.afi.content_type", b"user.afi.etag", b"user.afi.entry")
# Memory-only files (names the provider refuses: editors' and tools' temp files) are capped:
LOCAL_BYTES = 64 << 20  # bytes they may hold together; a write past it fails with ENOSPC
LOCAL_FILES = 1000  # how many there may be; one more is refused with ENOSPC
LOCAL_IDLE = 600.0  # seconds one may stay closed and unused before it is dropped
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


def _invalidate_pages(ino: int) -> None:
    with contextlib.suppress(OSError):  # the kernel does not hold it (any more)
        pyfuse3.invalidate_inode(ino, attr_only=False)


def _ignore_outcome(_outcome: object) -> None:
    """Nothing waits for a page invalidation (see ``FuseBase._invalidate``)."""


def _file_cap(provider: Provider) -> int:
    """The most bytes one file may hold: the manifest's ``x-limits.file_max_bytes``, else :data:`MAX_FILE`.

    A file written through the mount is buffered whole until it is stored, so a write or truncate past
    the cap is refused (EFBIG) before the buffer grows: a write at offset 2**40 must not try to fill memory.
    """
    limits = provider.manifest().model_dump(by_alias=True).get("x-limits") or {}
    cap = limits.get("file_max_bytes") if isinstance(limits, dict) else None
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else MAX_FILE


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
        local_bytes: bytes the memory-only files (names the provider refuses) may hold together.
        local_files: how many memory-only files there may be.
        local_idle: seconds a memory-only file may stay closed and unused before it is dropped.
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
    ) -> None:
        super().__init__()
        self.provider = provider
        self.caller = caller
        self.root = subtree
        self.read_only = read_only
        self.timeout = timeout
        self.inodes = Inodes(subtree, change_token)
        self.locals: dict[str, LocalFile] = {}
        self.local_bytes = local_bytes
        self.local_files = local_files
        self.local_idle = local_idle
        self._handles: dict[int, Handle | DirHandle] = {}
        self._next_fh = 1
        self._limiter = anyio.CapacityLimiter(threads)
        self._listings: dict[str, tuple[Hashable, float, list[Row]]] = {}
        self.max_file = _file_cap(provider)

    async def watch(self, every: float = 0.2) -> None:
        """Poll the change token; when the store changed, make the kernel ask again for what it holds.

        This is what lets the kernel keep names and attributes for long (``timeout``) and still show a
        write made through another binding within a fraction of a second.
        """
        if not self.inodes.watched:
            return
        while True:
            await trio.sleep(every)
            self._sweep_locals()
            if self.inodes.token_changed():
                self._listings.clear()
                inodes = self.inodes.looked_up()
                await trio.to_thread.run_sync(_invalidate_attributes, inodes)

    # -- plumbing --------------------------------------------------------------------------

    async def _call(self, verb: Callable[..., T], *args: Any, **kw: Any) -> T:
        return await offload(verb, self.caller, *args, limiter=self._limiter, **kw)

    def _open(self, handle: Handle | DirHandle) -> int:
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = handle
        if isinstance(handle, ReadHandle | WriteHandle):
            node = self.inodes.get(handle.ino)
            if node is not None:
                node.opened += 1
        return fh

    def _close(self, fh: int) -> Handle | DirHandle | None:
        """Forget handle ``fh``; a memory-only file it had open counts as used now (its idle time starts)."""
        handle = self._handles.pop(fh, None)
        if isinstance(handle, ReadHandle | WriteHandle):
            node = self.inodes.get(handle.ino)
            if node is not None:
                node.opened -= 1
                self.inodes.discard(node)
            local = self.locals.get(handle.path)
            if local is not None:
                local.used = time.monotonic()
        return handle

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
        node = self.inodes.known(path)  # never made here: a path that does not exist must leave no node
        if node is not None:
            cached = self.inodes.fresh(node)
            if cached is not None:
                return cached
        entry = await self._call(self.provider.stat, path)
        node = self.inodes.known(path)
        if node is not None:
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
        """Something changed through the mount: listings are no longer trusted; stale memory-only files go."""
        self._listings.clear()
        self._sweep_locals()

    # -- memory-only files -----------------------------------------------------------------

    def _sweep_locals(self) -> None:
        """Drop the memory-only files that no handle has open and that were not used for ``local_idle``."""
        if not self.locals:
            return
        now = time.monotonic()
        in_use = {h.path for h in self._handles.values() if isinstance(h, ReadHandle | WriteHandle)}
        for path, local in list(self.locals.items()):
            if path not in in_use and now - local.used >= self.local_idle:
                del self.locals[path]
                self.inodes.stale(path)
                log.info(
                    "%s: memory-only file dropped (%d bytes): closed and unused for %.0f s",
                    path,
                    len(local.data),
                    now - local.used,
                )

    def _memory_only(self, path: str) -> tuple[int, int, int]:
        """Return the memory-only files other than ``path``: how many, their bytes; and the bytes ``path`` holds.

        A file's bytes are the most of what it holds and what an open handle on it has buffered.
        """
        held = {p: len(f.data) for p, f in self.locals.items() if f.reason}
        for handle in self._handles.values():
            if isinstance(handle, WriteHandle) and handle.local and handle.buffer is not None and handle.path in held:
                held[handle.path] = max(held[handle.path], len(handle.buffer))
        mine = held.pop(path, 0)
        return len(held), sum(held.values()), mine

    def _make_room(self, path: str, size: int, *, reason: str | None = None) -> None:
        """Refuse with ENOSPC when memory-only ``path`` holding ``size`` bytes passes the caps.

        Only files the provider refused count (``reason``: a refusal about to make ``path`` memory-only);
        a new file whose name is not refused is on its way to the provider. Stale files are dropped first.
        """
        local = self.locals.get(path)
        counted = local is not None and bool(local.reason)
        if not counted and reason is None:
            return

        def over() -> str | None:
            files, total, held = self._memory_only(path)
            if not counted and files + 1 > self.local_files:
                return f"{files} such files are the most it holds (local_files)"
            if size > held and total + size > self.local_bytes:
                return f"{total + size} bytes would pass the {self.local_bytes} bytes they may hold (local_bytes)"
            return None

        if over() is None:
            return
        self._sweep_locals()
        why = over()
        if why is None:
            return
        refusal = reason or (local.reason if local is not None else "")
        log.warning("%s: refused with ENOSPC: kept in memory only (%s), and %s", path, refusal, why)
        raise fuse_error(errno.ENOSPC)

    def _may_change(self, entry: Entry | None = None) -> None:
        """Refuse a change: EROFS on a read-only mount, EACCES without the write scope or on a read-only path."""
        if self.read_only:
            raise fuse_error(errno.EROFS)
        self.caller.require("afi:write")
        if entry is not None and "w" not in str(entry.attributes.get("permissions", "rw")):
            raise Forbidden("this path is read-only", path=entry.path)

    def _invalidate(self, ino: int) -> None:
        """Drop the kernel's attributes and pages of ``ino``: the provider may store it otherwise than written.

        The attributes go at once (no page lock is taken), so the next open sees the stored size (an
        ``>>`` right after a ``>`` appends at the stored end). The pages go in a thread of its own that
        nothing waits for: dropping pages waits for their locks, and a page may be locked by a write(2)
        that is itself waiting for this file system to answer, so from a request handler it could
        deadlock the whole mount.
        """
        _invalidate_attributes([ino])
        trio.lowlevel.start_thread_soon(functools.partial(_invalidate_pages, ino), _ignore_outcome)

    def _repoint_handles(self, source: str, destination: str) -> None:
        for handle in self._handles.values():
            if isinstance(handle, ReadHandle | WriteHandle) and is_within(handle.path, source):
                handle.path = destination + handle.path[len(source) :]
