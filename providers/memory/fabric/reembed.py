"""``afi db reembed``: move every note vector of a store over to another embedder, resumably.

A store's vectors all come from the one embedder ``meta`` names (:class:`~.store.Store` refuses to
open it with another). Moving it over re-embeds every note row (every version, every space) from
:func:`~.embedders.embedding_text`, the text every writer embeds, and keeps each vector as the store
keeps a note's (:mod:`.vector_swap`), so the store ends as it would be had it been written with the
new embedder from the start.

1. **Batches.** Notes are read in rowid order, a batch at a time, embedded outside any transaction,
   and written, each batch in one transaction, into a staging table (``afi_reembed_vectors``: the
   note's rowid, the ``seq`` of the version embedded, the vector), beside the target embedder
   (``afi_reembed_target``). The notes keep their vectors and ``meta`` its embedder meanwhile, so the
   store serves as before, and writers go on writing.
2. **The swap**, one transaction holding the notes table: the notes not staged yet or changed since
   (their ``seq`` moved) are embedded, every row takes its staged vector, ``meta`` names the new
   embedder, and the staging tables go. On PostgreSQL the column's type follows the embedder
   (``sparsevec`` or ``halfvec``) and the HNSW index is built again for it.

``kill -9`` at any moment leaves the batches committed so far and nothing of the batch or swap under
way; the next run goes on after the last staged rowid. The vectors and ``meta`` change in one
transaction, so ``meta`` always names the embedder the stored vectors came from. A process that has
the store open with the old embedder refuses to search or write vectors from then on
(:meth:`~.store.Store.check_vectors`), asking to be restarted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from afi.storage.database import Database

from .choice import recorded_in
from .embedders import Embedder, embedding_text
from .errors import MemoryValidationError
from .rows import _SELECT, iso_now, note_from_row
from .vector_swap import PgVectorSwap, SqliteVectorSwap, VectorSwap

__all__ = ["STAGED", "TARGET", "Progress", "Reembedded", "reembed_store", "staged_move"]

STAGED = "afi_reembed_vectors"
TARGET = "afi_reembed_target"

Progress = Callable[[str, int, int], None]
Named = tuple[str | None, int | None]

_AFTER = f"SELECT {_SELECT} FROM notes WHERE rowid > ? ORDER BY rowid LIMIT ?"
# the notes the batches missed (written after them) or whose version changed since it was staged
_STALE = (
    f"SELECT {_SELECT} FROM notes WHERE NOT EXISTS "
    f"(SELECT 1 FROM {STAGED} s WHERE s.note_rowid = notes.rowid AND s.seq = notes.seq) ORDER BY rowid"
)
_STAGE = (
    f"INSERT INTO {STAGED} (note_rowid, seq, embedding) VALUES (?, ?, ?) "
    "ON CONFLICT (note_rowid) DO UPDATE SET seq = excluded.seq, embedding = excluded.embedding"
)
_META = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"


@dataclass(frozen=True)
class Reembedded:
    """What a run did: the embedder before and after, and how many notes it re-embedded."""

    before: str | None
    before_dims: int | None
    embedder: str
    dims: int
    swapped: bool  # False: the store was on that embedder already, nothing was done
    notes: int = 0  # the note rows whose vectors were swapped
    resumed: int = 0  # of those, staged by an earlier run that was stopped
    caught_up: int = 0  # embedded in the swap: written or changed while the batches ran
    discarded: str | None = None  # an unfinished move to another embedder, dropped


def staged_move(database: Database) -> tuple[str, int, int] | None:
    """The unfinished move a stopped run left (its embedder, dims and staged vectors), or None."""
    with database.read() as conn:
        if not database.engine.table_columns(conn, TARGET):
            return None
        found = conn.execute(f"SELECT embedder, dims FROM {TARGET}").fetchone()
        if found is None:
            return None
        staged = int(conn.execute(f"SELECT COUNT(*) FROM {STAGED}").fetchone()[0])
    return str(found[0]), int(found[1]), staged


def reembed_store(database: Database, embedder: Embedder, *, batch: int = 256,
                  progress: Progress | None = None) -> Reembedded:  # fmt: skip
    """Given a store and an embedder, move every note vector over to it (see the module); a run stopped
    before goes on where it stopped. Return what was done.

    ``progress(phase, done, total)`` is called as it goes: ``re-embedding`` after each batch,
    ``catching up`` and ``swapping`` in the final transaction.

    Raises:
        MemoryValidationError: not an embedder, a batch under 1, or vectors of another size than its dims.
    """
    if not isinstance(embedder, Embedder) or not isinstance(embedder.dims, int) or not embedder.name:
        raise MemoryValidationError("embedder must have a name, integer dims and an embed(texts) method")
    if not isinstance(batch, int) or batch < 1:
        raise MemoryValidationError("batch must be a positive integer")
    report: Progress = progress or (lambda phase, done, total: None)
    target = (embedder.name, embedder.dims)
    with database.read() as conn:
        before = recorded_in(conn)
    pending = staged_move(database)
    discarded = None
    if pending is not None and pending[:2] != target:
        discarded = pending[0]
        _drop_staging(database)
    if before == target:
        _drop_staging(database)
        return _result(before, target, swapped=False, discarded=discarded)
    swap = _swap(database, *target)
    resumed = _stage_batches(database, embedder, swap, batch, report)
    return _swap_in(database, embedder, swap, batch, report, before, resumed, discarded)


def _result(before: Named, target: tuple[str, int], **done: Any) -> Reembedded:
    return Reembedded(before=before[0], before_dims=before[1], embedder=target[0], dims=target[1], **done)


def _swap(database: Database, embedder: str, dims: int) -> VectorSwap:
    sqlite: type[VectorSwap] = SqliteVectorSwap
    return database.engine.choose(sqlite=sqlite, postgresql=PgVectorSwap)(embedder, dims)


def _drop_staging(database: Database) -> None:
    with database.transaction() as conn:
        conn.execute(f"DROP TABLE IF EXISTS {STAGED}")
        conn.execute(f"DROP TABLE IF EXISTS {TARGET}")


def _stage_batches(database: Database, embedder: Embedder, swap: VectorSwap, batch: int, report: Progress) -> int:
    """Stage every note's vector, a batch a transaction, after what an earlier run staged; return how
    many that run had staged."""
    with database.transaction() as conn:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {TARGET} (embedder TEXT NOT NULL, dims {swap.integer} NOT NULL, "
            "started_at TEXT NOT NULL)"
        )
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {STAGED} (note_rowid {swap.integer} PRIMARY KEY, "
            f"seq {swap.integer} NOT NULL, embedding {swap.vector_type} NOT NULL)"
        )
        if conn.execute(f"SELECT COUNT(*) FROM {TARGET}").fetchone()[0] == 0:
            conn.execute(f"INSERT INTO {TARGET} VALUES (?, ?, ?)", (swap.embedder, swap.dims, iso_now()))
    with database.read() as conn:
        resumed, after = conn.execute(f"SELECT COUNT(*), COALESCE(MAX(note_rowid), 0) FROM {STAGED}").fetchone()
        total = int(conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0])
    done = int(resumed)
    report("re-embedding", done, max(total, done))
    while True:
        with database.read() as conn:
            rows = conn.execute(_AFTER, (after, batch)).fetchall()
        if not rows:
            return int(resumed)
        staged = _embedded(rows, embedder, swap)
        with database.transaction() as conn:
            conn.executemany(_STAGE, staged)
        after, done = rows[-1][0], done + len(rows)
        report("re-embedding", done, max(total, done))


def _swap_in(database: Database, embedder: Embedder, swap: VectorSwap, batch: int, report: Progress,
             before: Named, resumed: int, discarded: str | None) -> Reembedded:  # fmt: skip
    """The final transaction: catch up, swap every vector, name the new embedder, drop the staging."""
    target = (swap.embedder, swap.dims)
    with database.transaction() as conn:
        swap.hold_notes(conn)
        if not database.engine.table_columns(conn, TARGET):  # another run swapped them meanwhile
            return _result(before, target, swapped=False, discarded=discarded)
        stale = conn.execute(_STALE).fetchall()
        report("catching up", 0, len(stale))
        for start in range(0, len(stale), batch):
            chunk = stale[start : start + batch]
            conn.executemany(_STAGE, _embedded(chunk, embedder, swap))
            report("catching up", start + len(chunk), len(stale))
        report("swapping", 0, 1)
        swap.clear(conn)
        conn.execute(swap.update.format(staged=STAGED))
        notes = int(conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0])
        conn.executemany(_META, [("embedder", swap.embedder), ("dims", str(swap.dims))])
        swap.index(conn)
        conn.execute(f"DROP TABLE {STAGED}")
        conn.execute(f"DROP TABLE {TARGET}")
    report("swapping", 1, 1)
    return _result(before, target, swapped=True, notes=notes, resumed=resumed, caught_up=len(stale),
                   discarded=discarded)  # fmt: skip


def _embedded(rows: Sequence[Sequence[Any]], embedder: Embedder, swap: VectorSwap) -> list[tuple[Any, Any, Any]]:
    """Given ``rowid, seq, *NOTE_COLUMNS`` rows, return ``(rowid, seq, vector)`` to stage, each vector
    as the store keeps a note's."""
    texts = [embedding_text(note_from_row(row)) for row in rows]
    vectors = embedder.embed(texts)
    if getattr(vectors, "shape", None) != (len(texts), swap.dims):
        raise MemoryValidationError(
            f"embedder {swap.embedder!r} gave vectors of shape {getattr(vectors, 'shape', None)} for "
            f"{len(texts)} texts; {swap.dims} dims were expected"
        )
    return [(row[0], row[1], swap.value(vectors[n])) for n, row in enumerate(rows)]
