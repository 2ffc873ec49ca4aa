"""The store under the memory fabric: notes, their indexes and their changes (working blocks and
lineage: :mod:`.side_rows`; many new notes at once: :mod:`.bulk`; the notes still without vectors:
:mod:`.backlog`; the embedder's record: :mod:`.embedder_record`).

One :class:`~afi.storage.database.Database`: a SQLite file (WAL, one connection per thread), a
PostgreSQL database, or ``:memory:`` (one connection behind a lock). The tables are
:mod:`afi.storage.steps`' list, brought up to date at open. What the store does its own way on each
engine is :mod:`.sqlite_notes`' or :mod:`.pg_notes`', chosen when it opens.
``meta`` records the embedder the vectors came from; a store opened with another is refused, and one
moved over to another (``afi db reembed``, :mod:`.reembed`) while this process has it open refuses its
vector writes and searches (``Store.check_vectors``). Every note insert/update/delete appends to
``note_changes``; its ``seq`` is the store-wide counter written into ``notes.seq``, so another process
(or another replica) can tell what changed. A write joins the transaction this thread already holds
(a verb's), so the note, its indexes and the verb's other rows commit together.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from afi.storage.database import Connection, Database, open_database

from .backlog import Later, VectorBacklog
from .band_rows import BandRows
from .bulk import BulkNotes
from .changes import NoteChanges
from .embedder_record import EmbedderRecord
from .errors import MemoryValidationError
from .rows import (
    _INDEX_SELECT,
    _SELECT,
    INSERT_CHANGE,
    NOTE_COLUMNS,
    _note_values,
    _scope_key,
    change_row,
    iso_now,
    note_from_row,
    scope_lock_key,
)
from .side_rows import ScopeSideRows
from .sqlite_notes import SqliteNotes
from .types import MemoryNote, Scope

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from afi.storage.pg_vector_form import VectorForm

    from .pg_notes import PgNotes

__all__ = ["NOTE_COLUMNS", "Store", "iso_now", "note_from_row"]


def _pg_notes(database: Database) -> PgNotes:
    # imported here: PostgreSQL's vector columns load pgvector and numpy, which a SQLite store opens without
    from .pg_notes import PgNotes

    return PgNotes(database)


class Store(EmbedderRecord, ScopeSideRows, NoteChanges, BulkNotes, VectorBacklog, BandRows):
    """One database holding every scope's notes; thread-safe (a connection per thread, or a pool)."""

    def __init__(self, path: str | os.PathLike[str] = ":memory:", *, embedder_name: str, dims: int) -> None:
        self.path = os.fspath(path)
        self.in_memory = self.path == ":memory:"
        self.database = open_database(self.path)
        self.engine = self.database.engine
        notes: Callable[[Database], SqliteNotes | PgNotes] = SqliteNotes
        self.notes = self.engine.choose(sqlite=notes, postgresql=_pg_notes)(self.database)
        self._local = threading.local()  # the serial of this thread's transaction this store wrote in
        self._closed = False
        self._tx_hooks: list[Callable[[int, bool], None]] = []
        self.embedder_name, self.dims = embedder_name, dims
        self._check_embedder(embedder_name, dims)
        # on PostgreSQL: sparsevec for a sparse embedder, halfvec otherwise (afi.storage.pg_vector_form)
        self.vector_form: VectorForm = self.notes.settle_vectors(self.write)
        # what a row keeps of the note's Markdown: all of it in SQLite, the front matter in PostgreSQL,
        # where SQL adds the content back (afi.storage.pg_derived_notes)
        self._rendering: tuple[str, Callable[[MemoryNote], str]] = self.notes.rendering
        self._init_bands()

    # -- connections and transactions ------------------------------------------------------

    def conn(self) -> Connection:
        """Return this thread's SQLite connection (tests and tools; PostgreSQL lends connections by block)."""
        self._check_open()
        if not self.notes.lends_thread_connection:
            raise MemoryValidationError("a PostgreSQL store lends connections by block: use read() or write()")
        with self.database.read() as conn:
            return conn

    def _check_open(self) -> None:
        if self._closed:
            raise MemoryValidationError("the memory store is closed")

    @contextmanager
    def write(self, scope: Scope | None = None) -> Iterator[Connection]:
        """Run the block in a write transaction, joining this thread's (if any). With a scope, on PostgreSQL,
        hold its advisory lock to the end: its writers take turns, as ``BEGIN IMMEDIATE`` makes SQLite's."""
        self._check_open()
        with self.database.transaction() as conn:
            serial = self.database.transaction_serial()
            if serial is not None and getattr(self._local, "tx", None) != serial:
                self._local.tx = serial
                self.database.after_transaction(functools.partial(self._ended, serial))
            if scope is not None:
                self.engine.lock_scope(conn, scope_lock_key(scope))
            yield conn

    def _ended(self, tx: int, committed: bool) -> None:
        if getattr(self._local, "tx", None) == tx:
            self._local.tx = None
        for hook in self._tx_hooks:
            hook(tx, committed)

    def on_transaction_end(self, hook: Callable[[int, bool], None]) -> None:
        """Call ``hook(tx, committed)`` whenever a write transaction this store wrote in ends."""
        self._tx_hooks.append(hook)

    def uncommitted_tx(self) -> int | None:
        """Return the serial of this thread's transaction if this store wrote in it and it has not
        ended (a read now may see rows not yet committed), else None."""
        current = getattr(self._local, "tx", None)
        return int(current) if current is not None and current == self.database.transaction_serial() else None

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """Yield a connection for reads (this thread's, or the one its transaction holds)."""
        self._check_open()
        with self.database.read() as conn:
            yield conn

    def close(self) -> None:
        """Close the store: no call works after this. A SQLite file's other threads' connections close
        when those threads end; a PostgreSQL pool is shared by the process and stays open."""
        self._closed = True
        self.engine.release(self.database)

    # -- schema ------------------------------------------------------------------------

    @property
    def migrations(self) -> list[int]:
        """Return the applied migration steps of the store file, in order."""
        with self.read() as conn:
            return [step.number for step in self.engine.applied_steps(conn)]

    # -- notes -------------------------------------------------------------------------

    def _bump(self, conn: Connection, scope: Scope, note_id: str, op: str, origin: str | None = None) -> int:
        row = conn.execute(
            f"{INSERT_CHANGE} RETURNING seq", change_row(_scope_key(scope), note_id, op, origin)
        ).fetchone()
        return int(row[0])

    def _vector(self, embedding: npt.NDArray[np.float32] | bytes) -> Any:
        """An embedding (or :func:`pack_vector`'s bytes of one, checked) as the engine keeps it, at half
        precision: those bytes in SQLite, a ``halfvec`` or ``sparsevec`` in PostgreSQL."""
        if isinstance(embedding, bytes):
            return self.notes.vector_of_blob(embedding, self.vector_form)
        return self.notes.vector(embedding, self.vector_form)

    def _with_blobs(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Rows whose last column is an embedding, that column as SQLite keeps it on either engine
        (:func:`unpack_vector` reads it)."""
        return self.notes.with_blobs(rows)

    def scope_rows(self) -> str:
        """The condition that a row looked up by rowid is the scope's (SQLite's ``+`` keeps the planner
        on the rowid instead of the scope's index; PostgreSQL's planner needs no such hint)."""
        plus = self.engine.rowid_hint
        return f"AND {plus}tenant_id = ? AND {plus}resource_id = ? AND {plus}thread_id = ?"

    def insert_note(
        self,
        scope: Scope,
        note: MemoryNote,
        embedding: npt.NDArray[np.float32] | Later | None,
        *,
        origin: str | None = None,
    ) -> int:
        """Insert a note row (with its rendering and embedding; :data:`~.backlog.LATER` or None: none yet);
        return its seq. ``origin``: the store a synced note came from."""
        with self.write() as conn:
            seq = self._bump(conn, scope, note.id, "upsert", origin)
            column, render = self._rendering
            cols = ("tenant_id", "resource_id", "thread_id", *NOTE_COLUMNS, "seq", column, "embedding")
            blob = None if embedding is None or isinstance(embedding, Later) else self._vector(embedding)
            values = [*_scope_key(scope), *_note_values(note), seq, render(note), blob]
            marks = ", ".join("?" * len(cols))
            with self._vector_write(conn, blob is not None):
                inserted = conn.execute(
                    f"INSERT INTO notes ({', '.join(cols)}) VALUES ({marks}) RETURNING rowid", values
                )
                rowid = int(inserted.fetchone()[0])
            self._band_rows(conn, scope, [(rowid, note.content)])
            return seq

    def update_note(
        self,
        scope: Scope,
        note: MemoryNote,
        embedding: npt.NDArray[np.float32] | Later | None = None,
        *,
        origin: str | None = None,
    ) -> int:
        """Rewrite the row with ``note.id`` (every field and its rendering; the embedding only when
        given, :data:`~.backlog.LATER`: none until it is made); return its new seq. Raises
        MemoryValidationError when the row is not in the scope."""
        with self.write() as conn:
            seq = self._bump(conn, scope, note.id, "upsert", origin)
            column, render = self._rendering
            sets = [f"{col} = ?" for col in NOTE_COLUMNS] + ["seq = ?", f"{column} = ?"]
            values = [*_note_values(note), seq, render(note)]
            old = self._old_content(conn, scope, note.id)
            if isinstance(embedding, Later):
                sets.append("embedding = NULL")
            elif embedding is not None:
                sets.append("embedding = ?")
                values.append(self._vector(embedding))
            with self._vector_write(conn, embedding is not None and not isinstance(embedding, Later)):
                cur = conn.execute(
                    f"UPDATE notes SET {', '.join(sets)} "
                    "WHERE tenant_id = ? AND resource_id = ? AND thread_id = ? AND id = ?",
                    [*values, *_scope_key(scope), note.id],
                )
            if cur.rowcount != 1 or old is None:
                raise MemoryValidationError(f"note {note.id} is not in this scope")
            if old[1] != note.content:
                self._unband_row(conn, scope, *old)
                self._band_rows(conn, scope, [(old[0], note.content)])
            return seq

    def restate_note(self, scope: Scope, note_id: str) -> int:
        """Record a change of the note ``note_id`` without changing it (a sync's peers are then sent its
        state again); return the new seq."""
        with self.write() as conn:
            seq = self._bump(conn, scope, note_id, "upsert")
            conn.execute(
                "UPDATE notes SET seq = ? WHERE tenant_id = ? AND resource_id = ? AND thread_id = ? AND id = ?",
                (seq, *_scope_key(scope), note_id),
            )
            return seq

    def delete_note(self, scope: Scope, note_id: str, *, origin: str | None = None) -> int:
        """Delete the row with that id from the scope (a forget: the change log keeps a ``delete``);
        return how many rows went (0 or 1)."""
        with self.write() as conn:
            old = self._old_content(conn, scope, note_id)
            if old is not None:
                self._unband_row(conn, scope, *old)
            cur = conn.execute(
                "DELETE FROM notes WHERE tenant_id = ? AND resource_id = ? AND thread_id = ? AND id = ?",
                (*_scope_key(scope), note_id),
            )
            if cur.rowcount:
                self._bump(conn, scope, note_id, "delete", origin)
            return cur.rowcount

    def select_notes(self, scope: Scope, where: str = "TRUE", params: Sequence[Any] = (), *, order: str = "id",
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
        among, params = self.engine.among("rowid", rowids)
        sql = f"SELECT {_SELECT} FROM notes WHERE {among} {self.scope_rows()}"
        with self.read() as conn:
            rows = conn.execute(sql, (*params, *_scope_key(scope))).fetchall()
        return {row[0]: note_from_row(row, scope) for row in rows}

    def columns_by_rowid(
        self, scope: Scope, rowids: Sequence[int], columns: Sequence[str]
    ) -> dict[int, tuple[Any, ...]]:
        """Return ``{rowid: (column, …)}`` of the named note columns for those rowids that are rows of the
        scope (a recall's signals and its blend read a few columns of many candidates)."""
        if not rowids:
            return {}
        among, params = self.engine.among("rowid", rowids)
        sql = f"SELECT rowid, {', '.join(columns)} FROM notes WHERE {among} {self.scope_rows()}"
        with self.read() as conn:
            return {int(row[0]): tuple(row[1:]) for row in conn.execute(sql, (*params, *_scope_key(scope))).fetchall()}

    def rows_by_rowid(self, scope: Scope, rowids: Sequence[int]) -> list[tuple[Any, ...]]:
        """Return ``rowid, seq, *NOTE_COLUMNS, embedding`` rows of the scope with those rowids."""
        if not rowids:
            return []
        among, params = self.engine.among("rowid", rowids)
        sql = f"SELECT {_SELECT}, embedding FROM notes WHERE {among} {self.scope_rows()}"
        with self.read() as conn:
            return self._with_blobs(conn.execute(sql, (*params, *_scope_key(scope))).fetchall())

    def rows_with_embeddings(self, scope: Scope, where: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Return ``rowid, seq, *NOTE_COLUMNS, embedding`` rows of the scope matching a condition."""
        sql = (
            f"SELECT {_SELECT}, embedding FROM notes WHERE tenant_id = ? AND resource_id = ? AND thread_id = ? "
            f"AND ({where})"
        )
        with self.read() as conn:
            return self._with_blobs(conn.execute(sql, (*_scope_key(scope), *params)).fetchall())

    def index_rows(self, scope: Scope, where: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Return ``rowid, id, kind, valid_from, valid_to, consent, source_entry_ids, status, embedding``
        of the scope's rows matching a condition: what the vector index keeps of each."""
        sql = (
            f"SELECT {_INDEX_SELECT} FROM notes WHERE tenant_id = ? AND resource_id = ? AND thread_id = ? AND ({where})"
        )
        with self.read() as conn:
            return self._with_blobs(conn.execute(sql, (*_scope_key(scope), *params)).fetchall())

    def lexical(self, scope: Scope, terms: list[str], *, kinds: Sequence[str], as_of: str, limit: int) -> list[int]:
        """Return the rowids of the scope's active notes of those kinds valid at ``as_of`` that hold any
        of the terms, best BM25 first."""
        marks = ", ".join("?" * len(kinds))
        valid = (
            f"n.status = 'active' AND n.kind IN ({marks}) AND (n.valid_from IS NULL OR n.valid_from <= ?) "
            "AND (n.valid_to IS NULL OR n.valid_to > ?)"
        )
        with self.read() as conn:
            return self.notes.lexical(conn, scope, terms, valid=valid, params=(*kinds, as_of, as_of), limit=limit)

    def rank_lexical(self, scope: Scope, terms: list[str], *, limit: int | None) -> list[int]:
        """Return the rowids of notes holding any of the terms, best BM25 first (the best ``limit``, or
        all). On SQLite the FTS5 index is read alone, across every scope (recall filters by the vector
        index's mask, which knows the scope, kinds and validity); on PostgreSQL the scope's notes only."""
        with self.read() as conn:
            return self.notes.rank_lexical(conn, scope, terms, limit=limit)

    def every_match(self, scope: Scope, terms: list[str], *, limit: int) -> list[int] | None:
        """The rowids of every note (any scope, as ``rank_lexical``) holding any of the terms, in no order;
        None past ``limit``, when no term is indexed, and on PostgreSQL (its fold asks the HNSW graph)."""
        with self.read() as conn:
            return self.notes.every_match(conn, terms, limit=limit)

    @staticmethod
    def _latest_seq(conn: Connection) -> int:
        return int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM note_changes").fetchone()[0])

    def select_terms(self, terms: list[str], *, max_postings: int, min_terms: int = 1) -> list[str]:
        """Given query terms, return the rarest ones whose summed posting lists stay under the cap."""
        with self.read() as conn:
            seq = self._latest_seq(conn)
            return self.notes.select_terms(conn, terms, seq=seq, max_postings=max_postings, min_terms=min_terms)
