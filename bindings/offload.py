"""One synchronous provider call, guarded, and off the event loop: what every binding does per request.

The provider's verbs block (SQLite, files), so the async bindings run each one in a worker thread
with :func:`offload`. Whatever the call raises that is not an :class:`~afi.errors.AfiError` is a bug
in the provider: :func:`guarded` logs it and raises ``internal`` (:func:`stray`) in its place, so no binding answers
with a traceback or drops its connection. :func:`offload` works under asyncio (HTTP, MCP, SSH) and
under trio (FUSE): anyio picks the running loop's own thread pool.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import anyio.to_thread
from anyio.lowlevel import RunVar

from afi import config
from afi.errors import AfiError, Internal

__all__ = ["guarded", "offload", "search_lane", "stray"]

T = TypeVar("T")

log = logging.getLogger("afi.bindings")

_SEARCH_LANE: RunVar[anyio.CapacityLimiter] = RunVar("afi_search_lane")


def stray(err: Exception) -> Internal:
    """Given an exception a provider call raised that is not an AfiError, log it (a bug) and return the
    ``internal`` error that stands for it."""
    log.error("a provider call failed", exc_info=err)
    return Internal(f"the provider failed: {type(err).__name__}")


def guarded(fn: Callable[..., T], /, *args: Any, **kw: Any) -> T:
    """Call ``fn(*args, **kw)``; an AfiError passes, any other exception is logged and becomes ``internal``."""
    try:
        return fn(*args, **kw)
    except AfiError:
        raise
    except Exception as err:
        raise stray(err) from err


async def offload(fn: Callable[..., T], /, *args: Any, limiter: anyio.CapacityLimiter | None = None, **kw: Any) -> T:
    """Run ``fn(*args, **kw)`` in a worker thread, :func:`guarded`; ``limiter`` caps the threads in use."""
    return await anyio.to_thread.run_sync(partial(guarded, fn, *args, **kw), limiter=limiter)


def search_lane() -> anyio.CapacityLimiter:
    """The worker threads searches of this event loop may hold at once: ``AFI_SEARCH_THREADS``, or as
    many as the machine has cores.

    A search is CPU work (SQLite and the matcher) in one thread; running more of them at once than
    there are cores makes each slower (GIL handoffs, per-connection page caches) without finishing
    any sooner, while stats and reads wait behind them. Searches past the lane queue; other verbs
    keep their own threads.
    """
    try:
        return _SEARCH_LANE.get()
    except LookupError:
        lane = anyio.CapacityLimiter(config.search_threads())
        _SEARCH_LANE.set(lane)
        return lane
