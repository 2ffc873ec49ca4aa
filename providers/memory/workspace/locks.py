"""One write lock per space, shared by every thread and every process that opens the same store.

A conditional write (``if_match``, ``create_only``, an append, a quota check) reads the current state
and then writes; two writers must never interleave between those steps, whether they are two threads
of one ``afi serve`` or ``afi serve``, ``afi ssh`` and ``afi mount`` on one store. Inside a process a
re-entrant thread lock orders the threads; across processes the holder also takes an exclusive
``flock`` on ``<store>.locks/<space>.lock``. The kernel drops a ``flock`` when its holder dies (even by
``kill -9``), so a crash never leaves a space locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

__all__ = ["SpaceLocks", "ThreadHolds", "lock_folder"]


def lock_folder(db: Path) -> Path:
    """The folder that holds the lock files of the store at ``db``."""
    return db.with_name(db.name + ".locks")


class _SpaceLock:
    """One space's lock file, and the thread lock that lets one thread of this process use it at a time
    (re-entry is counted by :meth:`SpaceLocks.hold`, per thread)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.thread_lock = threading.Lock()
        self.fd: int | None = None

    def acquire(self) -> None:
        self.thread_lock.acquire()
        try:
            if self.fd is None:
                self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            self.thread_lock.release()
            raise

    def release(self) -> None:
        try:
            if self.fd is not None:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            self.thread_lock.release()

    def close_if_idle(self) -> bool:
        """Close the lock file unless a thread holds the lock; return whether it is closed."""
        if not self.thread_lock.acquire(blocking=False):
            return False
        try:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
            return True
        finally:
            self.thread_lock.release()


class ThreadHolds:
    """How deep this thread holds each space's lock: a nested hold takes no second lock."""

    def __init__(self) -> None:
        self._local = threading.local()

    @contextlib.contextmanager
    def enter(self, space: str) -> Iterator[bool]:
        """Count one hold of ``space`` by this thread for the block; yield whether it is the outermost."""
        held: dict[str, int] = self._local.__dict__.setdefault("spaces", {})
        depth = held.get(space, 0)
        held[space] = depth + 1
        try:
            yield depth == 0
        finally:
            if depth:
                held[space] = depth
            else:
                del held[space]


class SpaceLocks:
    """The write locks of the spaces of one store (``folder`` holds the lock files).

    At most ``keep`` locks stay open (a descriptor each); past that, the ones no thread holds are closed
    and forgotten, least recently used first, so touching many spaces never runs a process out of
    descriptors. A thread that still has a forgotten lock in hand stays safe: the ``flock`` on its own
    descriptor excludes another thread holding the new one as it excludes another process, and a
    thread's own nested holds never take a second lock.
    """

    def __init__(self, folder: Path, *, keep: int = 64) -> None:
        self.folder = folder
        self.keep = keep
        self._locks: OrderedDict[str, _SpaceLock] = OrderedDict()
        self._guard = threading.Lock()
        self._holds = ThreadHolds()

    @contextlib.contextmanager
    def hold(self, space: str) -> Iterator[None]:
        """Hold the space's write lock for the ``with`` block (re-entrant within a thread).

        Re-entry is counted per thread and space, not per lock object: a lock forgotten while this
        thread held it is not the one a nested ``hold`` would find, and its ``flock`` would shut this
        thread out of the new one.
        """
        with self._holds.enter(space) as first:
            if not first:
                yield
                return
            lock = self._lock(space)
            lock.acquire()
            try:
                yield
            finally:
                lock.release()

    def _lock(self, space: str) -> _SpaceLock:
        with self._guard:
            found = self._locks.get(space)
            if found is None:
                self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                found = self._locks[space] = _SpaceLock(self.folder / f"{space}.lock")
                self._forget_idle()
            self._locks.move_to_end(space)
            return found

    def _forget_idle(self) -> None:
        """Close and forget the least recently used locks no thread holds, down to ``keep`` (``_guard`` held)."""
        for name in list(self._locks)[:-1]:
            if len(self._locks) <= self.keep:
                return
            if self._locks[name].close_if_idle():
                del self._locks[name]

    def open_count(self) -> int:
        """How many lock files this process holds open."""
        with self._guard:
            return sum(1 for lock in self._locks.values() if lock.fd is not None)

    def close(self) -> None:
        """Close the lock files that no thread holds."""
        with self._guard:
            for lock in self._locks.values():
                lock.close_if_idle()
