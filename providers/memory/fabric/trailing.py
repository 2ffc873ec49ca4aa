"""Vectors made after the write: a sentence embedder's work taken off a remember's path.

A sentence model takes most of a remember's time (about 10 ms a note on 2 cores, against about 2 ms
for the rest of the write), and its vectors serve only recall: the fold and the links of such a store
read the words (:mod:`.consolidate`). So a note of a sentence-embedder store commits with its words
indexed (full text, trigrams) and no vector, and is embedded afterwards:

- **by a thread of the process that wrote it**, woken by the write, a batch at a time, each batch
  embedded outside any transaction and stored in one (:meth:`~.backlog.VectorBacklog.fill_vectors`:
  only onto the version it was made from); it lets the scope's writes go first (a batch waits for a
  pause of 50 ms in them, at most a second);
- **by a recall**, before it searches, when its scope has at most ``CATCH_UP`` notes waiting: a
  recall just after a few writes ranks them by meaning like any other. With more waiting, the recall
  searches now and says how many notes it could find only by their words (``vectors_pending``);
- **before the process exits** (or the memory closes), for the scopes it wrote without vectors: a
  command that writes ends with its notes whole, as when the write embedded them; a process killed
  before that leaves them to the next write or recall of their scope, in any process.

No read misses a committed note: until its vector is in, a note is found by the word signals (BM25,
exact and regex search, listings); recall's vector signal gains it when the vector lands.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from .embedders import Embedder, embedding_text
from .errors import MemoryValidationError
from .types import MemoryNote, Scope

if TYPE_CHECKING:
    from .store import Store

__all__ = ["CATCH_UP", "TrailingVectors"]

CATCH_UP = 32
_BATCH = 32
_RETRY_S = 1.0
_QUIET_S = 0.05
_YIELD_S = 1.0
_log = logging.getLogger(__name__)

Progress = Callable[[int], None]
# what this process wrote without vectors, made before it exits
_OWED: weakref.WeakSet[TrailingVectors] = weakref.WeakSet()
_HOOKED = False
_HOOK_LOCK = threading.Lock()


class TrailingVectors:
    """Fills in the vectors of one scope's notes written without one (see the module)."""

    def __init__(self, store: Store, embedder: Embedder, scope: Scope, *, batch: int = _BATCH) -> None:
        self.store, self.embedder, self.scope, self.batch = store, embedder, scope, batch
        self._fill_lock = threading.Lock()  # the thread's passes and fill()'s take turns
        self._state = threading.Condition()
        self._wrote = False  # this process wrote notes without vectors
        self._wake = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._owed = False  # notes written without vectors in a transaction not yet committed
        self._last_write = 0.0  # time.monotonic() of this scope's last write without vectors
        store.on_transaction_end(self._transaction_ended)

    def wrote(self) -> None:
        """Say that notes were just written without their vectors: the thread fills them once their
        transaction commits (at once when it has)."""
        self._last_write = time.monotonic()
        with self._state:
            if not self._wrote:
                self._wrote = True
                _owe(self)
            if self.store.uncommitted_tx() is not None:
                self._owed = True
                return
        self._wake_thread()

    def _transaction_ended(self, tx: int, committed: bool) -> None:
        if self._owed and committed:
            self._owed = False
            self._wake_thread()

    def _wake_thread(self) -> None:
        with self._state:
            if self._closed:
                return
            self._wake = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="afi-vectors", daemon=True)
                self._thread.start()
            self._state.notify()

    def catch_up(self, limit: int = CATCH_UP) -> int:
        """Fill the scope's waiting vectors now when there are at most ``limit``; return how many still
        wait (0 when none did or all were filled)."""
        waiting = self.store.without_vectors(self.scope, limit=limit + 1)
        if not waiting:
            return 0
        if len(waiting) > limit:
            self._wake_thread()  # written by another process, or before this one started
            return self.store.count_without_vectors(self.scope)
        # not behind the thread's lock: a recall does not wait for a batch, and a row the thread fills
        # first is left alone (a fill lands only on a row still without a vector)
        try:
            self._embed_and_store(waiting)
        except MemoryValidationError:
            raise  # the store's vectors moved to another embedder: the recall must not search them
        except Exception as error:  # a writer holding the store: this recall goes on by the words
            _log.info("a recall went on without making %d waiting vectors: %s", len(waiting), error)
            self._wake_thread()
        return self.store.count_without_vectors(self.scope)

    def fill(self, progress: Progress | None = None) -> int:
        """Fill every vector the scope still waits for, a batch at a time; return how many were stored."""
        stored, after = 0, 0
        while True:
            with self._fill_lock:
                waiting = self.store.without_vectors(self.scope, limit=self.batch, after=after)
                if not waiting:
                    return stored
                stored += self._embed_and_store(waiting)
            after = waiting[-1][0]
            if progress is not None:
                progress(stored)

    def close(self) -> None:
        """Stop the thread and, when this process wrote notes without vectors, fill what is left."""
        with self._state:
            self._closed = True
            self._state.notify()
            thread, wrote = self._thread, self._wrote
        if thread is not None:
            thread.join()
        if wrote:
            self.fill()
            _OWED.discard(self)

    def _run(self) -> None:
        while True:
            with self._state:
                while not self._wake and not self._closed:
                    self._state.wait()
                if self._closed:
                    return
                self._wake = False
            try:
                self._fill_until_closed()
            except MemoryValidationError as error:  # the store moved to another embedder: nothing to retry
                _log.warning("note vectors are not made here any more: %s", error)
                return
            except Exception as error:  # a write holding the store past the busy timeout, a dropped connection
                _log.info("note vectors of %s wait (retried in %g s): %s", self.scope.resource_id, _RETRY_S, error)
                with self._state:
                    self._wake = True
                    self._state.wait(_RETRY_S)

    def _fill_until_closed(self) -> None:
        after = 0
        while not self._closed:
            self._yield_to_writes()
            with self._fill_lock:
                waiting = self.store.without_vectors(self.scope, limit=self.batch, after=after)
                if not waiting:
                    return
                self._embed_and_store(waiting)
            after = waiting[-1][0]

    def _yield_to_writes(self) -> None:
        """Wait until this scope's writes pause (``_QUIET_S`` without one), at most ``_YIELD_S``: on a few
        cores the model's batches and the writes share the CPU, and a caller waits for a write, not for
        a vector. Under writes that never pause, a batch still goes every ``_YIELD_S``."""
        deadline = time.monotonic() + _YIELD_S
        while not self._closed:
            now = time.monotonic()
            quiet = now - self._last_write
            if quiet >= _QUIET_S or now >= deadline:
                return
            time.sleep(min(_QUIET_S - quiet, deadline - now))

    def _embed_and_store(self, waiting: list[tuple[int, int, MemoryNote]]) -> int:
        if not waiting:
            return 0
        texts = [embedding_text(note) for _, _, note in waiting]
        vectors = self.embedder.embed(texts)
        return self.store.fill_vectors([(rowid, seq, vectors[n]) for n, (rowid, seq, _) in enumerate(waiting)])


def _owe(trailing: TrailingVectors) -> None:
    """Have the process make this scope's vectors before it exits. The hook is registered at the first
    write, after the store's first connection: ``atexit`` runs the last registered first, so it runs
    before the hook that closes connections (:mod:`afi.sqlite`'s finalizers)."""
    global _HOOKED
    with _HOOK_LOCK:
        if not _HOOKED:
            atexit.register(_fill_before_exit)
            _HOOKED = True
        _OWED.add(trailing)


def _fill_before_exit() -> None:
    for trailing in list(_OWED):
        try:
            trailing.close()
        except Exception as error:  # a store closed under it, a database gone: left to the next write or recall
            _log.warning("some notes of %s keep no vector yet (made at its next write or recall): %s",
                         trailing.scope.resource_id, error)  # fmt: skip
