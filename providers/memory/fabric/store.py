"""The SQLite store under the memory fabric: notes, their indexes, working blocks, lineage, changes.

One file, WAL mode, one connection per thread (``:memory:`` shares one connection behind a lock).
The tables are :mod:`afi.storage.schema`'s, brought up to date at open. ``meta`` records the
embedder the vectors came from.
Every note insert/update/delete appends to ``note_changes``; its AUTOINCREMENT ``seq`` is the
store-wide counter written into ``notes.seq``, so another process can tell what changed.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from afi.sqlite import Connections, configure
from afi.storage import applied_steps, ensure_schema

from .errors import MemoryValidationError
from .lexical import TermStats
from .render import render_note
from .rows import _INDEX_SELECT, _SELECT, NOTE_COLUMNS, _note_values, _scope_key, iso_now, note_from_row
from .types import MemoryNote, Scope

__all__ = ["NOTE_COLUMNS", "Store", "iso_now", "note_from_row"]

_MEMORY_LOCKS: dict[int, threading.RLock] = {}


class Store:
    """One SQLite file holding every scope's notes; thread-safe through per-thread connections."""

    def __init__(self, path: str | os.PathLike[str] = ":memory:", *, embedder_name: str, dims: int) -> None:
        self.path = str(path)
        self.in_memory = self.path == ":memory:"
        self._local = threading.local()  # this thread's transaction depth and serial
        self._files = None if self.in_memory else Connections(self.path)
        self._shared: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._closed = False
        self._tx_serial = itertools.count(1)
        self._tx_hooks: list[Callable[[int, bool], None]] = []
        self.term_stats = TermStats()
        if self.in_memory:
            self._shared = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            configure(self._shared, wal=False)
        ensure_schema(self.conn())
        with self.write() as conn:
            self._check_embedder(conn, embedder_name, dims)

    # -- connections and transactions ------------------------------------------------------

    def conn(self) -> sqlite3.Connection:
        """Return this thread's connection (the shared one for ``:memory:``)."""
        if self._closed:
            raise MemoryValidationError("the memory store is closed")
        if self._shared is not None:
            return self._shared
        assert self._files is not None
        return self._files.get()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """Run the block in one IMMEDIATE transaction (nested calls join the outer one)."""
        conn = self.conn()
        depth = getattr(self._local, "depth", 0)
        lock = self._lock if self.in_memory else None
        if lock is not None:
            lock.acquire()
        try:
            if depth:
                self._local.depth = depth + 1
                try:
                    yield conn
                finally:
                    self._local.depth = depth
                return
            conn.execute("BEGIN IMMEDIATE")
            tx = next(self._tx_serial)
            self._local.depth = 1
            self._local.tx = (tx, conn.total_changes)
            committed = False
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
                committed = True
            finally:
                self._local.depth = 0
                self._local.tx = None
                for hook in self._tx_hooks:
                    hook(tx, committed)
        finally:
            if lock is not None:
                lock.release()

    def on_transaction_end(self, hook: Callable[[int, bool], None]) -> None:
        """Call ``hook(tx, committed)`` whenever a write transaction of this store ends."""
        self._tx_hooks.append(hook)

    def uncommitted_tx(self) -> int | None:
        """Return the serial of this thread's write transaction if it has changed rows not yet
        committed (a read now would see them), else None."""
        current = getattr(self._local, "tx", None)
        if current is None or self.conn().total_changes == current[1]:
            return None
        return int(current[0])

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """Yield this thread's connection for reads (serialised with writes for ``:memory:``)."""
        if self.in_memory:
            with self._lock:
                yield self.conn()
        else:
            yield self.conn()

    def close(self) -> None:
        """Close the store: no call works after this; this thread's connection closes now, every other
        thread's when that thread ends (closing one in use by another thread could crash SQLite)."""
        self._closed = True
        if self._files is not None:
            self._files.close()
        if self._shared is not None:
            self._shared.close()

    # -- schema ------------------------------------------------------------------------

    def _check_embedder(self, conn: sqlite3.Connection, name: str, dims: int) -> None:
        rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dims')").fetchall())
        if not rows:
            conn.executemany("INSERT INTO meta VALUES (?, ?)", [("embedder", name), ("dims", str(dims))])
            return
        if rows.get("embedder") != name or rows.get("dims") != str(dims):
            raise MemoryValidationError(
                f"this store was built with embedder {rows.get('embedder')!r} ({rows.get('dims')} dims); "
                f"it cannot be opened with {name!r} ({dims} dims)"
            )

    @property
    def migrations(self) -> list[int]:
        """Return the applied migration steps of the store file, in order."""
        with self.read() as conn:
            return [step.number for step in applied_steps(conn)]

    # -- notes -------------------------------------------------------------------------

    def _bump(self, conn: sqlite3.Connection, scope: Scope, note_id: str, op: str) -> int:
        cur = conn.execute(
            "INSERT INTO note_changes (tenant_id, resource_id, thread_id, note_id, op) VALUES (?, ?, ?, ?, ?)",
            (*_scope_key(scope), note_id, op),
        )
        assert cur.lastrowid is not None
        return cur.lastrowid

    def insert_note(self, scope: Scope, note: MemoryNote, embedding: npt.NDArray[np.float32] | None) -> int:
        """Insert a note row (with its rendering and embedding); return its seq."""
        with self.write() as conn:
            seq = self._bump(conn, scope, note.id, "upsert")
            cols = ("tenant_id", "resource_id", "thread_id", *NOTE_COLUMNS, "seq", "rendered", "embedding")
            blob = None if embedding is None else np.asarray(embedding, dtype=np.float32).tobytes()
            values = [*_scope_key(scope), *_note_values(note), seq, render_note(note), blob]
            conn.execute(f"INSERT INTO notes ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", values)
            return seq

    def update_note(self, scope: Scope, note: MemoryNote, embedding: npt.NDArray[np.float32] | None = None) -> int:
        """Rewrite the row with ``note.id`` (every field and its rendering; the embedding only when
        given); return its new seq. Raises MemoryValidationError when the row is not in the scope."""
        with self.write() as conn:
            seq = self._bump(conn, scope, note.id, "upsert")
            sets = [f"{col} = ?" for col in NOTE_COLUMNS] + ["seq = ?", "rendered = ?"]
            values = [*_note_values(note), seq, render_note(note)]
            if embedding is not None:
                sets.append("embedding = ?")
                values.append(np.asarray(embedding, dtype=np.float32).tobytes())
            cur = conn.execute(
                f"UPDATE notes SET {', '.join(sets)} "
                "WHERE tenant_id = ? AND resource_id = ? AND thread_id = ? AND id = ?",
                [*values, *_scope_key(scope), note.id],
            )
            if cur.rowcount != 1:
                raise MemoryValidationError(f"note {note.id} is not in this scope")
            return seq

    def delete_note(self, scope: Scope, note_id: str) -> int:
        """Delete the row with that id from the scope; return how many rows went (0 or 1)."""
        with self.write() as conn:
            cur = conn.execute(
                "DELETE FROM notes WHERE tenant_id = ? AND resource_id = ? AND thread_id = ? AND id = ?",
                (*_scope_key(scope), note_id),
            )
            if cur.rowcount:
                self._bump(conn, scope, note_id, "delete")
            return cur.rowcount

    def select_notes(self, scope: Scope, where: str = "1", params: Sequence[Any] = (), *, order: str = "id",
                     limit: int | None = None) -> list[MemoryNote]:  # fmt: skip
        """Return the scope's notes matching a SQL condition (over the notes columns)."""
        sql = (
            f"SELECT {_SELECT} FROM notes WHERE tenant_id = ? AND resource_id = ? AND thread_id = ? "
            f"AND ({where}) ORDER BY {order}"
        )
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self.read() as conn:
            rows = conn.execute(sql, (*_scope_key(scope), *params)).fetchall()
        return [note_from_row(row, scope) for row in rows]

    def notes_by_rowid(self, scope: Scope, rowids: Sequence[int]) -> dict[int, MemoryNote]:
        """Return ``{rowid: note}`` for those rowids that are rows of the scope."""
        if not rowids:
            return {}
        sql = (
            f"SELECT {_SELECT} FROM notes WHERE rowid IN ({', '.join('?' * len(rowids))}) "
            "AND +tenant_id = ? AND +resource_id = ? AND +thread_id = ?"
        )
        with self.read() as conn:
            rows = conn.execute(sql, (*rowids, *_scope_key(scope))).fetchall()
        return {row[0]: note_from_row(row, scope) for row in rows}

    def rows_by_rowid(self, scope: Scope, rowids: Sequence[int]) -> list[tuple[Any, ...]]:
        """Return ``rowid, seq, *NOTE_COLUMNS, embedding`` rows of the scope with those rowids."""
        if not rowids:
            return []
        sql = (
            f"SELECT {_SELECT}, embedding FROM notes WHERE rowid IN ({', '.join('?' * len(rowids))}) "
            "AND +tenant_id = ? AND +resource_id = ? AND +thread_id = ?"
        )
        with self.read() as conn:
            return conn.execute(sql, (*rowids, *_scope_key(scope))).fetchall()

    def rows_with_embeddings(self, scope: Scope, where: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Return ``rowid, seq, *NOTE_COLUMNS, embedding`` rows of the scope matching a condition."""
        sql = (
            f"SELECT {_SELECT}, embedding FROM notes WHERE tenant_id = ? AND resource_id = ? AND thread_id = ? "
            f"AND ({where})"
        )
        with self.read() as conn:
            return conn.execute(sql, (*_scope_key(scope), *params)).fetchall()

    def index_rows(self, scope: Scope, where: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Return ``rowid, id, kind, valid_from, valid_to, consent, source_entry_ids, status, embedding``
        of the scope's rows matching a condition: what the vector index keeps of each."""
        sql = (
            f"SELECT {_INDEX_SELECT} FROM notes WHERE tenant_id = ? AND resource_id = ? AND thread_id = ? AND ({where})"
        )
        with self.read() as conn:
            return conn.execute(sql, (*_scope_key(scope), *params)).fetchall()

    def lexical(self, scope: Scope, match: str, *, kinds: Sequence[str], as_of: str, limit: int) -> list[int]:
        """Return the rowids of the scope's active notes of those kinds valid at ``as_of`` that match
        an FTS5 expression, best BM25 first."""
        marks = ", ".join("?" * len(kinds))
        sql = (
            "SELECT notes.rowid FROM notes_lexical JOIN notes ON notes.rowid = notes_lexical.rowid "
            "WHERE notes_lexical MATCH ? AND notes.tenant_id = ? AND notes.resource_id = ? AND notes.thread_id = ? "
            f"AND notes.status = 'active' AND notes.kind IN ({marks}) "
            "AND (notes.valid_from IS NULL OR notes.valid_from <= ?) "
            "AND (notes.valid_to IS NULL OR notes.valid_to > ?) "
            "ORDER BY bm25(notes_lexical) LIMIT ?"
        )
        with self.read() as conn:
            rows = conn.execute(sql, (match, *_scope_key(scope), *kinds, as_of, as_of, limit)).fetchall()
        return [row[0] for row in rows]

    def select_terms(self, terms: list[str], *, max_postings: int, min_terms: int = 1) -> list[str]:
        """Given query terms, return the rarest ones whose summed posting lists stay under the cap."""
        with self.read() as conn:
            seq = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM note_changes").fetchone()[0]
            return self.term_stats.select(conn, terms, seq=seq, max_postings=max_postings, min_terms=min_terms)

    # -- changes -----------------------------------------------------------------------

    def change_seq(self, scope: Scope) -> int:
        """Return the latest change seq of the scope (0 before any change)."""
        with self.read() as conn:
            row = conn.execute(
                "SELECT MAX(seq) FROM note_changes WHERE tenant_id = ? AND resource_id = ? AND thread_id = ?",
                _scope_key(scope),
            ).fetchone()
        return int(row[0] or 0)

    def changes_since(self, scope: Scope, seq: int) -> list[tuple[int, str, str]]:
        """Return ``(seq, note_id, op)`` of the scope's changes after ``seq``, oldest first."""
        with self.read() as conn:
            return conn.execute(
                "SELECT seq, note_id, op FROM note_changes WHERE tenant_id = ? AND resource_id = ? "
                "AND thread_id = ? AND seq > ? ORDER BY seq",
                (*_scope_key(scope), seq),
            ).fetchall()

    # -- lineage -----------------------------------------------------------------------

    def revoke_source(self, scope: Scope, entry_id: str, status: str) -> None:
        """Record that a session entry was corrected, revoked, forgotten or put on legal hold."""
        with self.write() as conn:
            conn.execute(
                "INSERT INTO source_lineage VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET "
                "status = CASE WHEN source_lineage.status = 'legal_hold' THEN 'legal_hold' ELSE excluded.status END, "
                "changed_at = excluded.changed_at",
                (*_scope_key(scope), entry_id, status, iso_now()),
            )

    def revoked_sources(self, scope: Scope) -> dict[str, str]:
        """Return ``{entry_id: status}`` of the scope's revoked source entries."""
        with self.read() as conn:
            return dict(
                conn.execute(
                    "SELECT entry_id, status FROM source_lineage WHERE tenant_id = ? AND resource_id = ? "
                    "AND thread_id = ?",
                    _scope_key(scope),
                ).fetchall()
            )

    # -- working -----------------------------------------------------------------------

    def get_working(self, scope: Scope) -> tuple[dict[str, Any], int]:
        """Return the scope's working value and version (``{}``, 0 before the first write)."""
        with self.read() as conn:
            row = conn.execute(
                "SELECT value, version FROM working WHERE tenant_id = ? AND resource_id = ? AND thread_id = ?",
                _scope_key(scope),
            ).fetchone()
        if row is None:
            return {}, 0
        value = json.loads(row[0])
        return (value if isinstance(value, dict) else {}), int(row[1])

    def cas_working(self, scope: Scope, value: dict[str, Any], expected_version: int) -> int | None:
        """Write the working value if its version is still ``expected_version``; return the new
        version, or None when another writer got there first (nothing written)."""
        payload = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        with self.write() as conn:
            if expected_version == 0:
                cur = conn.execute(
                    "INSERT INTO working VALUES (?, ?, ?, ?, 1) ON CONFLICT DO NOTHING", (*_scope_key(scope), payload)
                )
            else:
                cur = conn.execute(
                    "UPDATE working SET value = ?, version = version + 1 WHERE tenant_id = ? AND resource_id = ? "
                    "AND thread_id = ? AND version = ?",
                    (payload, *_scope_key(scope), expected_version),
                )
            return expected_version + 1 if cur.rowcount == 1 else None
