"""The FUSE binding's shared plumbing: its limits, errno mapping, and the provider's verbs as the mount's caller."""

from __future__ import annotations

import errno
import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

import anyio
import pyfuse3

from afi.errors import ERRNO, AfiError
from afi.model import Entry
from afi.provider import Caller, Provider

from ..offload import offload
from .nodes import NOT_STORED_PATH, SEARCH_PATH

__all__ = [
    "MAX_FILE",
    "SEARCH_ENTRY",
    "WHOLE_CHUNK",
    "WINDOW",
    "XATTRS",
    "Calls",
    "file_cap",
    "fuse_error",
    "log",
    "mapped_errors",
    "not_stored_entry",
]

log = logging.getLogger("afi.fuse")
T = TypeVar("T")
P = ParamSpec("P")
WINDOW = 1 << 20  # bytes fetched per provider read
WHOLE_CHUNK = 32 << 20  # bytes per read when loading a file to rewrite it
MAX_FILE = 1 << 30  # the most a file may hold through the mount when the manifest names no file_max_bytes
XATTRS = (b"user.afi.content_type", b"user.afi.etag", b"user.afi.entry", b"user.afi.error")
SEARCH_ENTRY = Entry(
    path=SEARCH_PATH,
    type="file",
    size=0,
    mtime="1970-01-01T00:00:00.000Z",
    ctime="1970-01-01T00:00:00.000Z",
    content_type="application/x-ndjson",
    attributes={"permissions": "rw", "x-control": "search"},
)


def not_stored_entry(size: int) -> Entry:
    """The entry of ``/.afi/not-stored`` (read-only) when it holds ``size`` bytes."""
    return Entry(
        path=NOT_STORED_PATH,
        type="file",
        size=size,
        mtime="1970-01-01T00:00:00.000Z",
        ctime="1970-01-01T00:00:00.000Z",
        content_type="application/x-ndjson",
        attributes={"permissions": "r", "x-control": "not-stored"},
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


def file_cap(provider: Provider) -> int:
    """The most bytes one file may hold: the manifest's ``x-limits.file_max_bytes``, else :data:`MAX_FILE`.

    A file written through the mount is buffered whole until it is stored, so a write or truncate past
    the cap is refused (EFBIG) before the buffer grows: a write at offset 2**40 must not try to fill memory.
    """
    limits = provider.manifest().model_dump(by_alias=True).get("x-limits") or {}
    cap = limits.get("file_max_bytes") if isinstance(limits, dict) else None
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else MAX_FILE


class Calls:
    """The provider's verbs as the mount's caller: each call runs in a worker thread, ``threads`` at once at most."""

    def __init__(self, caller: Caller, threads: int) -> None:
        self._caller = caller
        self._limiter = anyio.CapacityLimiter(threads)

    async def __call__(self, verb: Callable[..., T], *args: Any, **kw: Any) -> T:
        """Run ``verb(caller, *args, **kw)`` off the event loop and return what it returns."""
        return await offload(verb, self._caller, *args, limiter=self._limiter, **kw)
