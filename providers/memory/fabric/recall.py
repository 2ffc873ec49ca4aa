"""Recall: the hybrid candidate batch (vector cosine fused with BM25), scoring, links and budget.

One candidate batch serves both recall and the write path's workers. Both rankings are filtered
before they are ranked (kind, validity at ``as_of``, consent, lineage, status), then fused by
weighted reciprocal rank, then moved by the time the query names and by adjacent notes
(:mod:`.signals`); that relevance in [0,1] is the hit's similarity.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from typing import TYPE_CHECKING, Any, cast

from .beside import beside
from .errors import MemoryValidationError
from .fields import canonical_time
from .lexical import query_terms
from .memory import HARD_TOP_K_CAP, FusionSettings, Memory
from .rows import iso_to_epoch
from .signals import Lifted, Parts, lifted
from .types import NOTE_KINDS, ExplainRow, MemoryNote, RecallHit, RecallResult

if TYPE_CHECKING:
    from .pg_vectors import PgVectorIndex
    from .vectors import VectorIndex

__all__ = [
    "DEFAULT_RECALL_KINDS",
    "LEXICAL_OVERSAMPLE",
    "RECALL_OVERSAMPLE",
    "Candidate",
    "Scoring",
    "estimate_tokens",
    "recall",
    "recall_candidates",
    "resolve_kinds",
    "resolve_scoring",
]

RECALL_OVERSAMPLE = 4
# the batch the signals ranked, and what waits for the dot products of its best with the query
Asked = tuple[Lifted, Callable[[], dict[int, float]]]
# the BM25 side reads this many times its window of best matches before filtering them
LEXICAL_OVERSAMPLE = 4
DEFAULT_RECALL_KINDS = ("fact", "file")
NEUTRAL_IMPORTANCE = 1.0


def estimate_tokens(text: str) -> int:
    """Given text, return the rough token count budgets use (characters / 4, rounded up)."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True)
class Scoring:
    """Resolved blend weights (summing to 1) and the recency half-life in milliseconds."""

    similarity: float
    recency: float
    importance: float
    half_life_ms: float


@dataclass
class Candidate:
    """One recalled note with its relevance parts."""

    note: MemoryNote
    similarity: float
    cosine: float
    score: float
    recency: float | None = None
    importance: float | None = None
    parts: Parts = field(default_factory=Parts)  # what the date and adjacency signals added to ``similarity``


def resolve_kinds(kinds: Any) -> tuple[str, ...]:
    """Given the ``kinds`` option, return the kinds to recall (default fact + file)."""
    if kinds is None:
        return DEFAULT_RECALL_KINDS
    if isinstance(kinds, str) or not isinstance(kinds, Sequence) or len(kinds) == 0:
        raise MemoryValidationError("kinds must be a non-empty list of note kinds")
    for kind in kinds:
        if kind not in NOTE_KINDS:
            raise MemoryValidationError(f"unknown memory note kind: {kind!r} (known: {', '.join(NOTE_KINDS)})")
    return tuple(dict.fromkeys(kinds))


def resolve_scoring(scoring: Any) -> tuple[Scoring | None, dict[str, Any] | None]:
    """Given the ``scoring`` option, return (blend weights or None, fusion overrides or None).

    Accepts ``recency_weight``, ``importance_weight`` (each in [0,1]), ``half_life_ms`` (required
    when recency_weight > 0) and ``fusion``. Weights summing over 1 are normalised down.
    """
    if scoring is None:
        return None, None
    if not isinstance(scoring, dict):
        raise MemoryValidationError("scoring must be a mapping")
    unknown = sorted(set(scoring) - {"recency_weight", "importance_weight", "half_life_ms", "fusion"})
    if unknown:
        raise MemoryValidationError(f"unknown scoring option(s): {', '.join(unknown)}")
    fusion = scoring.get("fusion")
    rw = scoring.get("recency_weight", 0) or 0
    iw = scoring.get("importance_weight", 0) or 0
    for label, value in (("recency_weight", rw), ("importance_weight", iw)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
            raise MemoryValidationError(f"{label} must be a number in [0,1]")
    if rw == 0 and iw == 0:
        return None, fusion
    half_life = scoring.get("half_life_ms")
    if rw > 0 and (isinstance(half_life, bool) or not isinstance(half_life, int | float) or not half_life > 0):
        raise MemoryValidationError("half_life_ms must be a positive number when recency_weight > 0")
    total = max(1.0, rw + iw)
    resolved = Scoring(
        similarity=1 - (rw + iw) / total,
        recency=rw / total,
        importance=iw / total,
        half_life_ms=float(half_life) if half_life else math.inf,
    )
    return resolved, fusion


def _recency(created_at: str, half_life_ms: float, now: float) -> float:
    if not math.isfinite(half_life_ms):
        return 1.0
    age_ms = (now - iso_to_epoch(created_at, now)) * 1000
    return 1.0 if age_ms <= 0 else 2 ** (-age_ms / half_life_ms)


def _fuse(vector: list[tuple[int, float]], lexical: list[int], fusion: FusionSettings) -> list[tuple[int, float]]:
    """Return ``(rowid, relevance in [0,1])`` best first, by weighted reciprocal rank."""
    if fusion.mode == "vector":
        return [(rowid, max(0.0, min(1.0, cos))) for rowid, cos in vector]
    wv = fusion.vector_weight if fusion.mode == "rrf" else 0.0
    wl = fusion.lexical_weight
    fused: dict[int, float] = {}
    if wv > 0:
        for rank, (rowid, _) in enumerate(vector, start=1):
            fused[rowid] = fused.get(rowid, 0.0) + wv / (fusion.k + rank)
    for rank, rowid in enumerate(lexical, start=1):
        fused[rowid] = fused.get(rowid, 0.0) + wl / (fusion.k + rank)
    best = (wv + wl) / (fusion.k + 1)
    order = sorted(fused.items(), key=lambda item: -item[1])
    return [(rowid, value / best) for rowid, value in order]


def recall_candidates(
    memory: Memory,
    query: str,
    kinds: Sequence[str],
    as_of: str,
    limit: int,
    scoring: Scoring | None = None,
    fusion: FusionSettings | None = None,
) -> list[Candidate]:
    """Return up to ``limit`` recallable notes for the query, best first (one bounded batch).

    SQLite's batch comes from the process's index (:func:`_asked_in_process`), PostgreSQL's from the
    database, its parts asked at once (:func:`_asked_of_database`). With ``scoring``, the oversampled
    batch is scored from the two columns the blend needs and only the notes kept are loaded whole.
    """
    fusion = fusion or memory.fusion
    stored = [kind for kind in kinds if kind in ("fact", "procedure", "file")]
    if not stored or limit <= 0:
        return []
    as_of_epoch = iso_to_epoch(as_of, 0.0)
    window = max(fusion.window, limit)
    depth = limit * RECALL_OVERSAMPLE if scoring is not None else limit
    index = memory.index
    asked = (query, stored, as_of_epoch, window, depth, fusion)
    if index.in_database:
        signals, cosines_soon = _asked_of_database(memory, cast("PgVectorIndex", index), *asked)
    else:
        signals, cosines_soon = _asked_in_process(memory, cast("VectorIndex", index), *asked)
    fused = signals.ranked[:depth]
    rowids = [rowid for rowid, _ in fused]
    if not fused:
        return []
    if scoring is not None:
        return _scored(memory, fused, cosines_soon, scoring, limit, signals)
    by_rowid = memory.store.notes_by_rowid(memory.scope, rowids)
    cosines = cosines_soon()
    out: list[Candidate] = []
    for rowid, relevance in fused:
        note = by_rowid.get(rowid)
        if note is not None:  # None: deleted between the index read and the row read
            out.append(Candidate(note, relevance, cosines.get(rowid, 0.0), relevance, parts=signals.parts(rowid)))
    return out[:limit]


def _terms(memory: Memory, query: str, fusion: FusionSettings) -> list[str]:
    """The query's terms BM25 ranks by (none when the fusion reads vectors only)."""
    if fusion.mode == "vector":
        return []
    return memory.store.select_terms(query_terms(query), max_postings=fusion.max_postings)


def _asked_in_process(memory: Memory, index: VectorIndex, query: str, stored: list[str], as_of: float,
                      window: int, depth: int, fusion: FusionSettings) -> Asked:  # fmt: skip
    """The batch from this process's matrix and SQLite's FTS5: the BM25 ranking read before the index's
    lock is taken, filtered by the index's mask inside it (every match read when the mask drops too
    many of the best); the mask, both rankings, the signals and the dot products of one state of the
    index, under one hold of its lock."""
    qvec = memory.embedder.embed([query])[0]
    terms = _terms(memory, query, fusion)
    reach: int | None = window * LEXICAL_OVERSAMPLE
    ranked: list[int] = []
    while True:
        if terms:
            ranked = memory.store.rank_lexical(memory.scope, terms, limit=reach)
        with index.lock:
            index.refresh()
            mask = index.mask(stored, as_of, memory.require_consent)
            passing = index.allowed_among(ranked, mask)
            lexical = list(islice((rowid for rowid in ranked if rowid in passing), window))
            if reach is not None and len(lexical) < window and len(ranked) == reach:
                reach = None  # the mask dropped most of the best matches (other kinds, old versions): read all
                continue
            vector = index.top(qvec, mask, window) if fusion.mode != "lexical" else []
            signals = lifted(memory, index, mask, query, as_of, _fuse(vector, lexical, fusion), depth, fusion)
            cosines = index.cosine(qvec, [rowid for rowid, _ in signals.ranked[:depth]])
        break
    return signals, lambda: cosines


def _asked_of_database(memory: Memory, index: PgVectorIndex, query: str, stored: list[str], as_of: float,
                       window: int, depth: int, fusion: FusionSettings) -> Asked:  # fmt: skip
    """The batch from PostgreSQL, both rankings filtered by the mask in their own statements. A worker
    thread embeds the query and asks the HNSW graph on a second connection while this thread chooses
    the terms and waits for the BM25 ranking (the model, the process and the server work at once); the
    dot products are read beside what follows."""
    mask = index.mask(stored, as_of, memory.require_consent)

    def vector_side() -> tuple[Any, list[tuple[int, float]]]:
        qvec = memory.embedder.embed([query])[0]
        return qvec, index.top(qvec, mask, window) if fusion.mode != "lexical" else []

    here = memory.store.database.in_transaction()
    vector_soon = beside(vector_side, here=here)
    index.refresh()  # raises when the store's vectors moved to another embedder: nothing found is used
    terms = _terms(memory, query, fusion)
    lexical = index.words(terms, mask, window) if terms else []
    qvec, vector = vector_soon()
    signals = lifted(memory, index, mask, query, as_of, _fuse(vector, lexical, fusion), depth, fusion)
    rowids = [rowid for rowid, _ in signals.ranked[:depth]]
    return signals, beside(lambda: index.cosine(qvec, rowids), here=here)


def _scored(
    memory: Memory,
    fused: list[tuple[int, float]],
    cosines_soon: Callable[[], dict[int, float]],
    scoring: Scoring,
    limit: int,
    signals: Lifted,
) -> list[Candidate]:
    """Score the fused batch by the blend (relevance, recency, importance) from the two columns it
    needs, then load the best ``limit`` notes whole (a row deleted meanwhile gives way to the next)."""
    scope = memory.scope
    columns = memory.store.columns_by_rowid(scope, [rowid for rowid, _ in fused], ("created_at", "importance"))
    cosines = cosines_soon()
    now = datetime.now(UTC).timestamp()
    ranked: list[tuple[float, int, float, float, float]] = []
    for rowid, relevance in fused:
        found = columns.get(rowid)
        if found is None:  # deleted between the index read and the row read
            continue
        created_at, imp = found
        recency = _recency(created_at, scoring.half_life_ms, now)
        importance = NEUTRAL_IMPORTANCE if imp is None else min(1.0, max(0.0, imp))
        score = relevance * scoring.similarity + recency * scoring.recency + importance * scoring.importance
        ranked.append((score, rowid, relevance, recency, importance))
    ranked.sort(key=lambda item: -item[0])  # stable: ties keep the fused order
    out: list[Candidate] = []
    start = 0
    while len(out) < limit and start < len(ranked):
        chunk = ranked[start : start + limit - len(out)]
        start += len(chunk)
        notes = memory.store.notes_by_rowid(scope, [rowid for _, rowid, _, _, _ in chunk])
        for score, rowid, relevance, recency, importance in chunk:
            note = notes.get(rowid)
            if note is not None:
                part = signals.parts(rowid)
                out.append(Candidate(note, relevance, cosines.get(rowid, 0.0), score, recency, importance, part))
    return out


def recall(
    memory: Memory,
    query: str,
    *,
    kinds: Any = None,
    as_of: Any = None,
    top_k: Any = None,
    budget: Any = None,
    scoring: Any = None,
) -> RecallResult:
    """Given a query, return the ranked hits and a parallel explain row per hit.

    See docs/memory-fabric.md, "Recall and scoring".
    """
    if not isinstance(query, str) or not query.strip():
        raise MemoryValidationError("query must be a non-empty string")
    resolved_kinds = resolve_kinds(kinds)
    as_of_iso = memory.present() if as_of is None else canonical_time(as_of, "as_of")
    k = memory.limits.top_k if top_k is None else top_k
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise MemoryValidationError("top_k must be a positive integer")
    k = min(k, HARD_TOP_K_CAP)
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise MemoryValidationError("budget must be a positive integer")
    resolved, fusion_override = resolve_scoring(scoring)
    fusion = FusionSettings.resolve(fusion_override, memory.fusion)
    trailing = memory.trailing
    # a few notes written just before are embedded now; past that they are found by their words
    pending = trailing.catch_up() if trailing is not None else 0
    batch = recall_candidates(
        memory, query, resolved_kinds, as_of_iso, min(HARD_TOP_K_CAP, k * RECALL_OVERSAMPLE), resolved, fusion
    )
    chosen: dict[str, tuple[Candidate, bool]] = {c.note.id: (c, False) for c in batch[:k]}
    by_id = {c.note.id: c for c in batch}
    expansions = 0
    for cand, _ in list(chosen.values()):
        for link in cand.note.links:
            if expansions >= k:
                break
            target = by_id.get(link.id)
            if target is None or link.id in chosen:
                continue
            chosen[link.id] = (target, True)
            expansions += 1
    hits: list[RecallHit] = []
    explain: list[ExplainRow] = []
    used = 0
    for cand, linked in chosen.values():
        content = memory.redact(cand.note.content)
        tokens = estimate_tokens(content)
        if hits and budget is not None and used + tokens > budget:
            break
        used += tokens
        data = cand.note.model_dump()
        data.update(content=content, token_count=tokens, score=cand.score)
        if cand.note.context is not None:
            data["context"] = memory.redact(cand.note.context)
        if resolved is not None:
            data.update(similarity=cand.similarity, recency=cand.recency)
        hits.append(RecallHit.model_validate(data))
        explain.append(
            ExplainRow(
                id=cand.note.id,
                score=cand.score,
                similarity=cand.similarity if resolved is not None else None,
                recency=cand.recency,
                importance=cand.importance,
                cosine=cand.cosine,
                dated=cand.parts.dated,
                adjacent=cand.parts.adjacent,
                link=linked,
                valid=True,
            )
        )
    return RecallResult(hits=hits, explain=explain, vectors_pending=pending or None)
