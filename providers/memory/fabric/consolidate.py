"""Consolidation: which existing note a write folds into, and how the two merge.

The note to fold into is the nearest same-kind note by cosine. A scope of ``CENTRE_ROWS`` notes or more
(2,000) whose rows are all banded asks its SimHash bands (:mod:`.fold_bands`): the notes sharing a
probed band with the new note's bag of words, each scored exactly; flat in the store's size. Before
that, on SQLite, up to ``FOLD_EXACT_ROWS`` notes in a scope, the nearest is found exactly by the vector
index (``VectorIndex.above``: only rows that can reach the threshold are scored); past it the word
index names the candidates: every note holding one of the new note's rarest words, scored by exact
cosine; the vectors decide when more than 24,576 notes hold them. Two bags of words at cosine t share
t² of the new note's words, so any 1 − t² of them, plus one, reach every such note. PostgreSQL asks
its HNSW graph. The linker and evolution workers read a BM25 batch of neighbours.

A sentence embedder's cosine says two notes speak of the same thing, not that one restates the other,
so in a store of one the fold and the links read the words on both engines: the notes holding the new
note's rarest words, scored by the cosine of the bags of words (the hash embedder's vectors, made on
the spot), so a store folds alike whichever embedder its recall uses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .embedders import HashEmbedder, bags_of_words
from .fold_bands import MIN_THRESHOLD as BANDS_MIN_THRESHOLD
from .fold_bands import bag_rows
from .lexical import has_words, normalize_note_text, query_terms
from .memory import Memory, consent_visible
from .rows import iso_to_epoch
from .store import NOTE_COLUMNS, note_from_row
from .types import MemoryNote, NoteLink

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "BAG_SLACK",
    "DEFAULT_THRESHOLD",
    "WORD_FOLD_MIN",
    "FoldCandidate",
    "Plan",
    "bag_survivors",
    "fold_candidates",
    "merge_links",
    "merge_notes",
    "plan_fold",
    "union",
]

DEFAULT_THRESHOLD = 0.85
_CANDIDATE_POSTINGS = 200
# past ``FOLD_EXACT_ROWS`` the fold scores every note holding one of the chosen words, up to this many;
# more, and the exact vector search decides. At a million notes the median is ~2,700 (p90 ~10k), a
# candidate costs ~1 µs and the exact search ~24 ms: 8,192 sent 14.5% of writes to it, this 2.3%
_WORD_CANDIDATES = 24_576
# below this threshold a near-duplicate need share few words (and may share only stopwords): vectors decide
WORD_FOLD_MIN = 0.5
# the fold's measure in a store of a sentence embedder: the hash embedder's bags of words
_BAGS = HashEmbedder()
# a kept bag scored this far under the threshold may still reach it from its text (float32 sums): read
BAG_SLACK = 1e-4
# what the fold reads of a candidate before it is scored
_FOLD_COLUMNS = ("content", "kind", "status", "valid_from", "valid_to")


@dataclass
class FoldCandidate:
    """An existing same-kind note valid now, with its cosine to the new note."""

    note: MemoryNote
    cosine: float


@dataclass(frozen=True)
class Plan:
    action: Literal["insert", "update", "supersede"]
    target: MemoryNote | None = None


def fold_candidates(
    memory: Memory,
    kind: str,
    content: str,
    embedding: npt.NDArray[np.float32],
    now: str,
    limit: int,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    neighbours: bool = True,
) -> list[FoldCandidate]:
    """Return up to ``limit`` same-kind notes valid at ``now``, highest cosine first (ties by id):
    every note at or above ``threshold`` (so the first is the note to fold into, when there is
    one) and, with ``neighbours``, the BM25 batch the workers read.

    Notes hidden by consent or lineage are left out: a write never folds into what recall cannot see.
    """
    from .vectors import VectorIndex  # the vector side (numpy with it) loads with the first write that folds

    if limit <= 0:
        return []
    if not bags_of_words(memory.embedder):
        return _by_words(memory, kind, content, now, limit, threshold, neighbours=neighbours)
    index = memory.index
    as_of = iso_to_epoch(now, 0.0)
    # a scope of CENTRE_ROWS notes or more: the SimHash bands name the candidates (fold_bands)
    banded = memory.store.band_candidates(memory.scope, content) if threshold >= BANDS_MIN_THRESHOLD else None
    # else SQLite past fold_exact_rows; PostgreSQL asks its HNSW graph at every size
    by_words = index if banded is None and isinstance(index, VectorIndex) and not index.folds_by_vectors() else None
    # the word index is read before the lock, so recalls in this process do not wait on it
    rowids = _word_candidates(memory, content, threshold) if by_words and threshold >= WORD_FOLD_MIN else None
    with index.lock:
        index.refresh()
        if banded is not None:
            near = index.above_among(embedding, banded, threshold, [kind], as_of, memory.require_consent, limit=limit)
        elif by_words is not None and rowids is not None:
            near = by_words.above_among(embedding, rowids, threshold, [kind], as_of, memory.require_consent,
                                        limit=limit)  # fmt: skip
        else:  # the vectors decide: a small scope, a dense embedder, or no bounded set of words
            near = index.above(embedding, threshold, [kind], as_of, memory.require_consent, limit=limit)
    found: dict[str, FoldCandidate] = {}
    if near:
        notes = memory.store.notes_by_rowid(memory.scope, [rowid for rowid, _ in near])
        for rowid, cosine in near:
            note = notes.get(rowid)
            if note is not None:  # None: gone since the index read it
                found[note.id] = FoldCandidate(note, cosine)
    if neighbours:
        for cand in _lexical_batch(memory, kind, content, embedding, now, limit, threshold):
            found.setdefault(cand.note.id, cand)
    out = sorted(found.values(), key=lambda c: (-c.cosine, c.note.id))
    return out[:limit]


def _by_words(memory: Memory, kind: str, content: str, now: str, limit: int, threshold: float, *,
              neighbours: bool) -> list[FoldCandidate]:  # fmt: skip
    """The fold's candidates in a store of a sentence embedder: its vectors say two notes speak of the
    same thing ("my sister lives in Paris", "... in Rome"), not that one restates the other, so the fold
    and the links read the words. Every note holding one of the content's rarest words (enough of them
    that any note at ``threshold`` holds one), scored by the cosine of the two bags of words, as a store
    of the hash embedder scores them; with ``neighbours``, the BM25 batch too."""
    banded = memory.store.band_candidates(memory.scope, content) if threshold >= BANDS_MIN_THRESHOLD else None
    chosen = _rarest_words(memory, content, threshold) if banded is None or neighbours else []
    if banded is None:
        if not chosen:
            return []
        rowids = memory.store.lexical(memory.scope, chosen, kinds=[kind], as_of=now, limit=_WORD_CANDIDATES)
        batch = set(rowids[:limit]) if neighbours else set()  # the BM25 batch the workers read
    else:  # the scope's bands name the candidates; the BM25 batch is asked for on its own
        batch = (
            set(memory.store.lexical(memory.scope, chosen, kinds=[kind], as_of=now, limit=limit)) if chosen else set()
        )
        near = bag_survivors(memory.store.bags_by_rowid(banded), _BAGS.embed([content])[0], banded, threshold)
        rowids = [*dict.fromkeys([*near, *batch])]
    # scored from their text alone; only those kept are read whole (and checked for consent and lineage)
    texts = memory.store.columns_by_rowid(memory.scope, rowids, _FOLD_COLUMNS)
    scored = [rowid for rowid in rowids if rowid in texts and (rowid in batch or _current(texts[rowid], kind, now))]
    if not scored:
        return []
    bags = _BAGS.embed([content, *(texts[rowid][0] for rowid in scored)])
    cosine_of = dict(zip(scored, (float(c) for c in bags[1:] @ bags[0]), strict=True))
    kept = [rowid for rowid in scored if cosine_of[rowid] >= threshold or rowid in batch]
    notes = _visible_notes(memory, memory.store.rows_by_rowid(memory.scope, kept))
    out = [FoldCandidate(note, cosine_of[rowid]) for rowid, note in notes]
    out.sort(key=lambda c: (-c.cosine, c.note.id))
    return out[:limit]


def bag_survivors(bags: Mapping[int, bytes], query: npt.NDArray[np.float32], rowids: Sequence[int],
                  threshold: float) -> list[int]:  # fmt: skip
    """Of those rowids, the ones whose kept bag of words (``bags``: :meth:`~.band_rows.BandRows.bags_by_rowid`)
    may reach ``threshold`` with the query's bag, and those without a kept bag: the ones whose text
    the fold reads and scores."""
    from .postings import dots  # numpy with it: the first fold by bags loads it

    held = [rowid for rowid in rowids if rowid in bags]
    out = [rowid for rowid in rowids if rowid not in bags]
    if held:
        scores = dots(bag_rows([bags[rowid] for rowid in held]), query)
        out += [rowid for rowid, score in zip(held, scores.tolist(), strict=True) if score >= threshold - BAG_SLACK]
    return out


def _current(columns: tuple[Any, ...], kind: str, now: str) -> bool:
    """Whether a row's ``_FOLD_COLUMNS`` are those of an active note of that kind valid at ``now`` (what
    :meth:`~.store.Store.lexical` keeps)."""
    _, row_kind, status, valid_from, valid_to = columns
    return bool(row_kind == kind and status == "active" and (valid_from is None or valid_from <= now)
                and (valid_to is None or valid_to > now))  # fmt: skip


def _visible_notes(memory: Memory, rows: list[tuple[Any, ...]]) -> list[tuple[int, MemoryNote]]:
    """The notes of ``rows`` (``Store.rows_by_rowid``) that recall may see: consent given, sources not revoked."""
    revoked = memory.revoked_sources()
    out: list[tuple[int, MemoryNote]] = []
    for row in rows:
        note = note_from_row(row[: 2 + len(NOTE_COLUMNS)], memory.scope)
        if consent_visible(note.consent, memory.require_consent) and not any(
            source in revoked for source in note.source_entry_ids
        ):
            out.append((int(row[0]), note))
    return out


def _rarest_words(memory: Memory, content: str, threshold: float) -> list[str]:
    """The content's rarest terms, enough that a note sharing a fraction ``threshold**2`` of them holds one."""
    terms = query_terms(content)
    # cosine t over bags of words: with A the new note's words and B the other's, t <= |A∩B| / sqrt(|A||B|)
    # and |A∩B| <= |B| give |A∩B| >= t² |A|, so any (1 - t²) of A's words, plus one, reach every such
    # note; the rarest few keep the posting lists short
    need = math.ceil(len(terms) * (1 - threshold * threshold)) + 1
    return memory.store.select_terms(terms, max_postings=_CANDIDATE_POSTINGS, min_terms=need)


def _word_candidates(memory: Memory, content: str, threshold: float) -> list[int] | None:
    """Every rowid holding one of the content's rarest words (on SQLite across scopes: the vector index
    keeps this scope's rows that recall may see); None when that is no bounded set (no words the index
    keeps, or more than ``_WORD_CANDIDATES`` notes), and the vectors must decide."""
    chosen = _rarest_words(memory, content, threshold)
    return memory.store.every_match(memory.scope, chosen, limit=_WORD_CANDIDATES) if chosen else None


def _lexical_batch(
    memory: Memory, kind: str, content: str, embedding: npt.NDArray[np.float32], now: str, limit: int,
    threshold: float,
) -> list[FoldCandidate]:  # fmt: skip
    """Return the BM25 top-``limit`` same-kind notes valid at ``now`` over the content's rarest
    terms, each with its exact cosine."""
    from .vector_bytes import unpack_vector

    chosen = _rarest_words(memory, content, threshold)
    if not chosen:
        return []
    rowids = memory.store.lexical(memory.scope, chosen, kinds=[kind], as_of=now, limit=limit)
    if not rowids:
        return []
    rows = {int(row[0]): row for row in memory.store.rows_by_rowid(memory.scope, rowids)}
    out: list[FoldCandidate] = []
    for rowid, note in _visible_notes(memory, list(rows.values())):
        blob = rows[rowid][-1]
        cosine = float(unpack_vector(blob) @ embedding) if blob else 0.0
        out.append(FoldCandidate(note, cosine))
    return out


def plan_fold(content: str, candidate: FoldCandidate | None, threshold: float) -> Plan:
    """Given the nearest candidate, return insert (below threshold), update (same tokens) or supersede.
    Two different texts of which one has no word (emoji, punctuation) never fold: the hash embedder
    gives every such text the same vector."""
    if candidate is None or candidate.cosine < threshold:
        return Plan("insert")
    if normalize_note_text(candidate.note.content) == normalize_note_text(content):
        return Plan("update", candidate.note)
    if not has_words(content) or not has_words(candidate.note.content):
        return Plan("insert")
    return Plan("supersede", candidate.note)


def union(left: list[str], right: list[str]) -> list[str]:
    """Return the stable-order union of two string lists."""
    return list(dict.fromkeys([*left, *right]))


def merge_links(*groups: list[NoteLink]) -> list[NoteLink]:
    """Return the links of every group; a later group wins on the same id."""
    merged: dict[str, NoteLink] = {}
    for group in groups:
        for link in group:
            merged[link.id] = link
    return list(merged.values())


def _narrow_consent(old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any] | None:
    """A rewrite keeps the row's consent; a new input may narrow it (hide), never widen it."""
    if old is None:
        return new
    if new is None:
        return old
    visible = bool(old.get("visible", True)) and bool(new.get("visible", True))
    merged = {**old, "visible": visible}
    if old.get("revoked_at"):
        merged["revoked_at"] = old["revoked_at"]
    return merged


def merge_notes(existing: MemoryNote, incoming: MemoryNote, *, now: str) -> MemoryNote:
    """Return the in-place rewrite: same id, annotations unioned, the incoming claims win, and the
    row's created_at, name, consent and importance kept (an explicit importance replaces it)."""
    return existing.model_copy(
        update={
            "content": incoming.content,
            "token_count": incoming.token_count,
            "ingested_at": now,
            "updated_at": now,
            "t_ref": incoming.t_ref or existing.t_ref,
            "valid_from": incoming.valid_from or existing.valid_from,
            "valid_to": incoming.valid_to,  # a reassertion is valid again unless it says otherwise
            "keywords": union(existing.keywords, incoming.keywords),
            "tags": union(existing.tags, incoming.tags),
            "source_entry_ids": union(existing.source_entry_ids, incoming.source_entry_ids),
            "links": merge_links(existing.links, incoming.links),
            "context": incoming.context or existing.context,
            "supersedes": incoming.supersedes or existing.supersedes,
            "promoted_from": incoming.promoted_from or existing.promoted_from,
            "path": existing.path or incoming.path,
            "importance": incoming.importance if incoming.importance is not None else existing.importance,
            "consent": _narrow_consent(existing.consent, incoming.consent),
        }
    )
