"""Space write locks for a PostgreSQL store: advisory locks, held by every replica on the same database.

A hold opens (or joins) this thread's transaction and takes ``pg_advisory_xact_lock`` on the space's
key, so two writers of one space wait for each other whichever process or machine they run on, and the
writes made while holding it commit together at the end of the outermost hold. PostgreSQL releases the
lock when the transaction ends, and when a replica's connection dies (a ``kill -9``), so a crash never
leaves a space locked.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator

from afi.storage.database import Database

from .locks import ThreadHolds

__all__ = ["AdvisorySpaceLocks", "advisory_key"]


def advisory_key(space: str) -> int:
    """The 64-bit advisory lock key of a space (a hash: spaces never share a key in practice)."""
    digest = hashlib.blake2b(f"afi-space:{space}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class AdvisorySpaceLocks:
    """The write locks of the spaces of one PostgreSQL store (the same interface as ``SpaceLocks``)."""

    def __init__(self, database: Database, *, stripes: int = 64) -> None:
        self.database = database
        self._holds = ThreadHolds()
        # Inside a process, writers of one space queue on a thread lock before borrowing a connection:
        # a burst to a hot space then parks one pooled connection in the advisory lock's queue, not all.
        self._stripes = [threading.Lock() for _ in range(stripes)]

    @contextlib.contextmanager
    def hold(self, space: str) -> Iterator[None]:
        """Hold the space's write lock for the ``with`` block, inside one transaction (re-entrant)."""
        with self._holds.enter(space) as first:
            if not first:
                yield
                return
            key = advisory_key(space)
            with self._stripes[key % len(self._stripes)], self.database.transaction() as conn:
                conn.execute("SELECT pg_advisory_xact_lock(?)", (key,))
                yield

    def open_count(self) -> int:
        """Advisory locks hold no descriptors."""
        return 0

    def close(self) -> None:
        """Nothing to close: the locks end with their transactions."""
