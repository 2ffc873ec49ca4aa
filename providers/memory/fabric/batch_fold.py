"""Which notes of a many-note remember insert as they are: the batch's fold searches made together.

Remembered one after the other, each note of a batch would search the store for a near-duplicate on
its own (one band lookup, one scoring, one insert a note). Most notes of a burst fold into nothing,
so a batch asks the question of all of them at once: one lookup of every note's band probes, every
candidate scored exactly as a single remember scores it (the vectors in a store of the hash embedder,
the bags of words of the candidates' texts in a sentence embedder's), and the batch's notes against
each other. A note none of that brings to the threshold inserts as it is, with the notes around it
in a few statements (:meth:`~.bulk.BulkNotes.insert_notes`); any other note (one that may fold, a
named note, a file note, an explicit id, a note the bands cannot answer for) is written by the
single remember's own path, after the notes before it, so it sees them as it would have one by one.

The answer only ever sends a note to the one-by-one path that might not have needed it, never the
other way: a note kept apart from the batch's earlier notes is compared with each of them whatever
its kind, and with the stored notes exactly as a single remember's fold would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .consolidate import _FOLD_COLUMNS, _current, bag_survivors, fold_candidates
from .embedders import HashEmbedder, bags_of_words
from .fold_bands import MIN_THRESHOLD
from .rows import iso_to_epoch

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .batch import Pending
    from .fabric import MemoryFabric

__all__ = ["plain_items"]

# a pair this near in float32 may be at the threshold in the fold's own arithmetic: kept apart
_SLACK = 1e-4
# rowids a statement reads texts of (within SQLite's 32,766 parameters)
_ROWIDS_A_STATEMENT = 30_000
_BAGS = HashEmbedder()


def plain_items(fabric: MemoryFabric, pending: Sequence[Pending], embeddings: Sequence[Any]) -> set[int]:
    """Given a batch's checked notes and their embeddings (or LATER), return the positions of those
    that insert as they are (see the module); call inside the batch's write transaction."""
    memory, settings = fabric.memory, fabric.settings
    if not pending or (fabric.attached and not settings.passive):
        return set()  # attached workers read each note's neighbours: every note goes the single way
    threshold = settings.threshold
    unnamed = [
        at for at, p in enumerate(pending)
        if not p.explicit_id and p.note.supersedes is None and p.note.name is None and p.note.kind != "file"
    ]  # fmt: skip
    if not unnamed:
        return set()
    by_bags = not bags_of_words(memory.embedder)
    vectors = _BAGS.embed([p.note.content for p in pending]) if by_bags else _stacked(embeddings)
    plain = set(unnamed)
    near_earlier = _near_earlier(vectors, threshold)
    plain -= near_earlier
    folding = [at for at in sorted(plain) if pending[at].folding]
    if not folding:
        return plain
    found = (
        memory.store.band_candidates_many(memory.scope, [pending[at].note.content for at in folding])
        if threshold >= MIN_THRESHOLD else [None] * len(folding)
    )  # fmt: skip
    answered = {at: rowids for at, rowids in zip(folding, found, strict=True) if rowids is not None}
    near = _near_stored_by_words(fabric, pending, vectors, answered) if by_bags else \
        _near_stored_by_vectors(fabric, pending, vectors, answered)  # fmt: skip
    near |= {at for at in folding if at not in answered and _folds_alone(fabric, pending[at], embeddings[at])}
    return plain - near


def _folds_alone(fabric: MemoryFabric, pending: Pending, embedding: Any) -> bool:
    """Whether the fold's own search (a scope not wholly banded, a text of no word, a crowded key, a
    threshold under the bands') finds the note a near-duplicate."""
    memory, threshold = fabric.memory, fabric.settings.threshold
    now = max(memory.present(), pending.now)
    note = pending.note
    found = fold_candidates(memory, note.kind, note.content, embedding, now, 1, threshold=threshold, neighbours=False)
    return bool(found) and found[0].cosine >= threshold - _SLACK


def _stacked(embeddings: Sequence[Any]) -> npt.NDArray[np.float32]:
    import numpy as np

    return np.vstack([np.asarray(e, dtype=np.float32) for e in embeddings])


def _near_earlier(vectors: npt.NDArray[Any], threshold: float) -> set[int]:
    """The positions of notes near an earlier note of the batch (which the fold would find stored)."""
    import numpy as np

    if len(vectors) < 2:
        return set()
    sims = np.tril(vectors @ vectors.T, k=-1)
    return {int(at) for at in np.flatnonzero((sims >= threshold - _SLACK).any(axis=1))}


def _near_stored_by_vectors(fabric: MemoryFabric, pending: Sequence[Pending], vectors: npt.NDArray[Any],
                            candidates: dict[int, list[int]]) -> set[int]:  # fmt: skip
    """Of the notes with band candidates, those the vector index finds a note at the threshold for
    (what :func:`~.consolidate.fold_candidates` reads in a store of the hash embedder)."""
    if not candidates:
        return set()
    memory, threshold = fabric.memory, fabric.settings.threshold
    index = memory.index
    as_of = iso_to_epoch(max([memory.present(), *(pending[at].now for at in candidates)]), 0.0)
    kinds = {at: pending[at].note.kind for at in candidates}
    with index.lock:
        index.refresh()
        return index.near_among_many(vectors, candidates, kinds, threshold - _SLACK, as_of, memory.require_consent)


def _near_stored_by_words(fabric: MemoryFabric, pending: Sequence[Pending], bags: npt.NDArray[Any],
                          candidates: dict[int, list[int]]) -> set[int]:  # fmt: skip
    """Of the notes with band candidates, those whose bag of words is at the threshold with a current
    candidate's (what :func:`~.consolidate._by_words` reads in a store of a sentence embedder)."""
    import numpy as np

    memory, threshold = fabric.memory, fabric.settings.threshold
    kept = memory.store.bags_by_rowid(sorted({rowid for rowids in candidates.values() for rowid in rowids}))
    # the kept bags first; the texts of only those near enough (or without a bag) read and scored
    survivors = {at: bag_survivors(kept, bags[at], rowids, threshold) for at, rowids in candidates.items()}
    every = sorted({rowid for rowids in survivors.values() for rowid in rowids})
    columns: dict[int, tuple[Any, ...]] = {}
    for start in range(0, len(every), _ROWIDS_A_STATEMENT):
        chunk = every[start : start + _ROWIDS_A_STATEMENT]
        columns.update(memory.store.columns_by_rowid(memory.scope, chunk, _FOLD_COLUMNS))
    held = [rowid for rowid in every if rowid in columns]
    if not held:
        return set()
    slot = {rowid: at for at, rowid in enumerate(held)}
    stored = _BAGS.embed([str(columns[rowid][0]) for rowid in held])
    present = memory.present()
    near: set[int] = set()
    for at, rowids in survivors.items():
        note = pending[at].note
        now = max(present, pending[at].now)
        current = [slot[rowid] for rowid in rowids if rowid in slot and _current(columns[rowid], note.kind, now)]
        if current and float(np.max(stored[current] @ bags[at])) >= threshold - _SLACK:
            near.add(at)
    return near
