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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .embedders import Embedder, embedding_text
from .errors import MemoryValidationError
from .types import MemoryNote, Scope

if TYPE_CHECKING:
    from .store import Store

__all__ = ["CATCH_UP", "TrailingVectors"]

CATCH_UP = 32
_BATCH = 32
_QUIET_S = 0.05  # a batch of the thread waits for a pause this long in the scope's writes...
_YIELD_S = 1.0  # ...at most this long
_RETRY_S = (1.0, 60.0)  # after a failed pass the thread waits the first, doubling up to the second
_log = logging.getLogger(__name__)

Progress = Callable[[int], None]
# what this process wrote without vectors (made before it exits), and whose thread is running (stopped)
_OWED: weakref.WeakSet[TrailingVectors] = weakref.WeakSet()
_RUNNING: weakref.WeakSet[TrailingVectors] = weakref.WeakSet()
_HOOKED = False
_HOOK_LOCK = threading.Lock()


class TrailingVectors:
    """Fills in the vectors of one scope's notes written without one (see the module)."""

    def __init__(self, store: Store, embedder: Embedder, scope: Scope, *, batch: int = _BATCH) -> None:
        self.store, self.embedder, self.scope, self.batch = store, embedder, scope, batch
        self._fill_lock = threading.Lock()  # the thread's passes and fill()'s take turns
        self._catch_up_lock = threading.Lock()  # recalls catching up take turns (the second finds it done)
        self._state = threading.Condition()
        self._written: set[str] = set()  # ids of the notes this process wrote without vectors
        self._wake = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._owed_tx: set[int] = set()  # transactions not yet committed that wrote notes without vectors
        self._last_write = 0.0  # time.monotonic() of this scope's last write without vectors
        self._failed_at = 0.0  # when a pass last failed, and how long to wait after it
        self._retry_s = _RETRY_S[0]
        store.on_transaction_end(self._transaction_ended)

    def wrote(self, note_ids: Iterable[str]) -> None:
        """Say that these notes were just written without their vectors: the thread makes them once
        their transaction commits (at once when it has)."""
        self._last_write = time.monotonic()
        with self._state:
            if not self._written:
                _owe(self)
            self._written.update(note_ids)
            tx = self.store.uncommitted_tx()
            if tx is not None:
                self._owed_tx.add(tx)
                return
        self._wake_thread()

    def _transaction_ended(self, tx: int, committed: bool) -> None:
        with self._state:
            if tx not in self._owed_tx:
                return
            self._owed_tx.discard(tx)
        if committed:
            self._wake_thread()

    def _wake_thread(self) -> None:
        with self._state:
            if self._closed:
                return
            self._wake = True
            if self._thread is None:  # none, or it ended when it found nothing to do
                thread = threading.Thread(target=self._run, name="afi-vectors", daemon=True)
                try:
                    thread.start()
                except RuntimeError as error:  # no thread to be had: left to the next recall or the exit
                    _log.warning("note vectors of %s wait: %s", self.scope.resource_id, error)
                    return
                self._thread = thread
                _hook()
                _RUNNING.add(self)
            self._state.notify()

    def catch_up(self, limit: int = CATCH_UP) -> int:
        """Fill the scope's waiting vectors now when there are at most ``limit``; return how many still
        wait (0 when none did or all were filled). Never waits long for a writer: on a busy store the
        recall goes on by the words."""
        waiting = self.store.without_vectors(self.scope, limit=limit + 1)
        if not waiting:
            return 0
        if len(waiting) > limit or time.monotonic() < self._failed_at + self._retry_s:
            self._wake_thread()  # written by another process, before this one started, or failing now
            return self.store.count_without_vectors(self.scope)
        with self._catch_up_lock:
            waiting = self.store.without_vectors(self.scope, limit=limit)
            try:
                self._embed_and_store(waiting, wait=False)
            except MemoryValidationError:
                raise  # the store's vectors moved to another embedder: the recall must not search them
            except Exception as error:  # a writer holding the store: this recall goes on by the words
                _log.info("a recall went on without making %d waiting vectors: %s", len(waiting), error)
                self._failed_at = time.monotonic()
                self._wake_thread()
        return self.store.count_without_vectors(self.scope)

    def fill(self, progress: Progress | None = None, *, only: set[str] | None = None) -> int:
        """Fill every vector the scope still waits for (``only``: of those notes), a batch at a time;
        return how many were stored."""
        return self._pass(only=only, progress=progress)[1]

    def fill_counted(self, progress: Callable[[int, int], None] | None = None) -> int:
        """:meth:`fill`, with ``progress(done, total)`` counted over the scope's notes waiting when it
        began (those the thread makes meanwhile included)."""
        total = self.store.count_without_vectors(self.scope) if progress is not None else 0
        if progress is None or not total:
            return self.fill()

        def report(_stored: int) -> None:
            progress(total - min(total, self.store.count_without_vectors(self.scope)), total)

        return self.fill(report)

    def close(self) -> None:
        """Stop the thread and make the vectors this process's writes still wait for."""
        with self._state:
            self._closed = True
            self._state.notify()
            thread, written = self._thread, set(self._written)
        if thread is not None:
            thread.join()
        if written:
            self.fill(only=written)
        _OWED.discard(self)
        _RUNNING.discard(self)

    def _run(self) -> None:
        while True:
            with self._state:
                if self._closed or not self._wake:
                    self._thread = None  # nothing more to do: the thread ends, a write starts another
                    _RUNNING.discard(self)
                    return
                self._wake = False
            try:
                self._fill_until_closed()
                self._retry_s = _RETRY_S[0]
            except Exception as error:  # the store busy past its timeout, a dropped connection, moved vectors
                self._failed_at = time.monotonic()
                _log.info("note vectors of %s wait (tried again in %g s): %s", self.scope.resource_id,
                          self._retry_s, error)  # fmt: skip
                with self._state:
                    self._wake = True
                    self._state.wait(self._retry_s)
                self._retry_s = min(self._retry_s * 2, _RETRY_S[1])

    def _fill_until_closed(self) -> None:
        """Passes over the scope's waiting notes until one finds nothing to do. A note passed over
        (edited or renamed since it was read) is read again by the next pass; when every note read was
        passed over, the writes that changed them wake the thread again."""
        while not self._closed:
            read, stored = self._pass(background=True)
            if stored in (0, read):
                return

    def _pass(self, *, only: set[str] | None = None, progress: Progress | None = None,
              background: bool = False) -> tuple[int, int]:  # fmt: skip
        """One pass over the scope's notes waiting, oldest first (``only``: of those notes; another
        process's are read past); return how many were read and how many stored. ``background``: the
        thread's, which lets the writes go first and stops when the memory closes."""
        read = stored = after = 0
        while not (background and self._closed):
            if background:
                self._yield_to_writes()
            with self._fill_lock:
                waiting = self.store.without_vectors(self.scope, limit=self.batch if only is None else 512,
                                                     after=after)  # fmt: skip
                if not waiting:
                    break
                chosen = waiting if only is None else [w for w in waiting if w[2].id in only]
                stored += self._embed_and_store(chosen)
            read, after = read + len(chosen), waiting[-1][0]
            if progress is not None:
                progress(stored)
        return read, stored

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

    def _embed_and_store(self, waiting: list[tuple[int, int, MemoryNote]], *, wait: bool = True) -> int:
        if not waiting:
            return 0
        texts = [embedding_text(note) for _, _, note in waiting]
        vectors = self.embedder.embed(texts)
        made = [(rowid, seq, vectors[n]) for n, (rowid, seq, _) in enumerate(waiting)]
        return self.store.fill_vectors(made, wait=wait)


def _owe(trailing: TrailingVectors) -> None:
    """Have the process make this scope's vectors before it exits."""
    _hook()
    _OWED.add(trailing)


def _hook() -> None:
    """Register the exit hook, once. It is registered at the first write or the first thread, after the
    store's first connection: ``atexit`` runs the last registered first, so it runs before the hook
    that closes connections (:mod:`afi.sqlite`'s finalizers)."""
    global _HOOKED
    with _HOOK_LOCK:
        if not _HOOKED:
            atexit.register(_before_exit)
            _HOOKED = True


def _before_exit() -> None:
    for trailing in {*_OWED, *_RUNNING}:
        try:
            trailing.close()
        except Exception as error:  # a store closed under it, a database gone: left to the next write or recall
            _log.warning("some notes of %s keep no vector yet (made at its next write or recall): %s",
                         trailing.scope.resource_id, error)  # fmt: skip
