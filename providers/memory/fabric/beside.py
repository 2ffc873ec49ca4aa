"""Work a recall does in a worker thread, beside its own: what waits for a database or a model.

A recall's parts do not all need each other. On PostgreSQL the vector search (the HNSW graph) and the
BM25 ranking are two statements the server can run at once on two connections, and the process only
waits for them: :func:`beside` starts one in a worker thread while the calling thread runs the other.
The drivers and the model's runtime let the GIL go while they wait or compute.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["beside"]

T = TypeVar("T")

_lock = threading.Lock()
_pool: tuple[int, ThreadPoolExecutor] | None = None  # (the process that made it, the pool)


def _workers() -> ThreadPoolExecutor:
    """This process's pool (a forked child makes its own: the parent's threads are not in it)."""
    global _pool
    with _lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(max_workers=4, thread_name_prefix="afi-beside"))
        return _pool[1]


def beside(work: Callable[[], T], *, here: bool = False) -> Callable[[], T]:
    """Start ``work`` in a worker thread; return what waits for its result (raising what it raised).
    ``here``: do it now, in this thread (a caller inside a transaction: a worker would read the store
    through another connection, without what the transaction wrote)."""
    if here:
        result = work()
        return lambda: result
    return _workers().submit(work).result
