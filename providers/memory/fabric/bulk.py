"""Many new note rows written in a few statements: what a sync's batch of versions new to a store needs.

Each row is what :meth:`~.store.Store.insert_note` writes (its rendering, its embedding, a change
row with its seq), but the change rows go in one statement and the note rows in one too (as many as
SQLite's parameters allow, about a thousand): SQLite runs a row's full-text triggers three to four
times faster when many rows share a statement, and the statements are parsed once a batch instead of
once a note.

Mixed into :class:`~.store.Store`, whose connections, renderings and vector forms they use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from afi.storage.database import Connection

from .backlog import Later
from .rows import NOTE_COLUMNS, _note_values, _scope_key, iso_now
from .types import MemoryNote, Scope

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["BulkNotes"]

# parameters a statement: SQLite's cap (since 3.32; PostgreSQL's is 65,535). A batch's rows go in as
# few statements as that allows: each statement that fires the full-text triggers flushes FTS5's
# pending terms (a savepoint), so fewer statements write fewer, larger segments
MAX_PARAMETERS = 32_766
_LAST_STAMP = (
    "SELECT stamp FROM note_changes WHERE tenant_id = ? AND resource_id = ? AND thread_id = ? ORDER BY seq DESC LIMIT 1"
)
_CHANGE = "INSERT INTO note_changes (tenant_id, resource_id, thread_id, note_id, op, origin, stamp) VALUES "


def _chunks(rows: Sequence[tuple[Any, ...]]) -> Iterator[Sequence[tuple[Any, ...]]]:
    per = max(1, MAX_PARAMETERS // len(rows[0]))
    for start in range(0, len(rows), per):
        yield rows[start : start + per]


def _values(chunk: Sequence[tuple[Any, ...]]) -> tuple[str, list[Any]]:
    """A multi-row ``VALUES`` list for the chunk and its parameters, in order."""
    one = f"({', '.join('?' * len(chunk[0]))})"
    return ", ".join([one] * len(chunk)), [value for row in chunk for value in row]


class BulkNotes:
    """Inserting many new notes at once (see the module)."""

    if TYPE_CHECKING:
        _rendering: tuple[str, Callable[[MemoryNote], str]]

        def write(self, scope: Scope | None = None) -> AbstractContextManager[Connection]: ...

        def _vector(self, embedding: npt.NDArray[np.float32] | bytes) -> Any: ...

        def _vector_write(self, conn: Connection, vector: bool) -> AbstractContextManager[None]: ...

        def _band_rows(self, conn: Connection, scope: Scope, rows: Sequence[tuple[int, str]]) -> None: ...

    def insert_notes(self, scope: Scope, notes: Sequence[MemoryNote],
                     embeddings: Sequence[npt.NDArray[np.float32] | bytes | Later | None], *,
                     origin: str | None = None) -> list[int]:  # fmt: skip
        """Insert new note rows (each with its rendering and embedding, or :func:`~.vector_bytes.pack_vector`'s
        bytes of one, checked; ids not in the scope and not repeated); return their seqs, in order.
        ``origin``: the store the notes came from. Their change rows share one stamp: the wall clock, or
        the scope's last stamp when that is later."""
        if not notes:
            return []
        key = _scope_key(scope)
        column, render = self._rendering
        blobs = [
            None if embedding is None or isinstance(embedding, Later) else self._vector(embedding)
            for embedding in embeddings
        ]
        with self.write() as conn:
            last = conn.execute(_LAST_STAMP, key).fetchone()
            wall = iso_now()
            stamp = str(last[0]) if last is not None and last[0] is not None and str(last[0]) > wall else wall
            seq_of: dict[str, int] = {}
            rowid_of: dict[str, int] = {}
            for chunk in _chunks([(*key, note.id, "upsert", origin, stamp) for note in notes]):
                values, params = _values(chunk)
                seq_of.update((str(note_id), int(seq)) for seq, note_id in
                              conn.execute(f"{_CHANGE}{values} RETURNING seq, note_id", params).fetchall())  # fmt: skip
            seqs = [seq_of[note.id] for note in notes]
            cols = ", ".join(("tenant_id", "resource_id", "thread_id", *NOTE_COLUMNS, "seq", column, "embedding"))
            rows = [(*key, *_note_values(note), seq, render(note), blob)
                    for note, seq, blob in zip(notes, seqs, blobs, strict=True)]  # fmt: skip
            with self._vector_write(conn, any(blob is not None for blob in blobs)):
                for chunk in _chunks(rows):
                    values, params = _values(chunk)
                    inserted = conn.execute(f"INSERT INTO notes ({cols}) VALUES {values} RETURNING rowid, id", params)
                    rowid_of.update((str(note_id), int(rowid)) for rowid, note_id in inserted.fetchall())
            self._band_rows(conn, scope, [(rowid_of[note.id], note.content) for note in notes])
        return seqs
