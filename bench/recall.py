"""recall latency p50/p95 at 100k notes (hash embedder, hybrid), beside SQLite FTS5 BM25 alone.

Both sides hold the same texts and answer the same queries in the same run: the fabric in its own
store (vector + BM25 fused, filtered by kind and validity), the baseline as one FTS5 table queried
with the same OR-of-terms expression and ``ORDER BY bm25`` — the cheapest lexical retrieval SQLite
offers. The first fabric query (which loads the scope's vector matrix) is reported apart.
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from ._common import comparison, comparisons, corpus, percentile, print_table, write_result
from .remember import load_base

__all__ = ["bm25_latencies", "fabric_latencies", "queries_for", "run"]

GOAL_P50_MS = 20.0
TOP_K = 10


def queries_for(texts: list[str], n: int, *, seed: int) -> list[str]:
    """Given stored texts, return n queries: 3-5 words drawn from a random stored text each."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = rng.choice(texts).split()[:-1]
        out.append(" ".join(rng.sample(words, k=min(len(words), rng.randint(3, 5)))))
    return out


def fabric_latencies(fabric: Any, queries: list[str]) -> list[float]:
    """Given a fabric and queries, return each recall's latency in milliseconds."""
    out = []
    for query in queries:
        started = time.perf_counter()
        fabric.recall(query, top_k=TOP_K)
        out.append((time.perf_counter() - started) * 1000)
    return out


def bm25_latencies(db: Path, texts: list[str], queries: list[str]) -> list[float]:
    """Given a fresh file, texts and queries, index the texts in FTS5 and return each query's latency (ms)."""
    from afi.providers.memory.fabric.lexical import fts_query, query_terms

    conn = sqlite3.connect(db)
    conn.execute("CREATE VIRTUAL TABLE docs USING fts5(content, tokenize='porter unicode61')")
    with conn:
        conn.executemany("INSERT INTO docs (content) VALUES (?)", ((t,) for t in texts))
    out = []
    for query in queries:
        started = time.perf_counter()
        conn.execute(
            "SELECT rowid, content FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
            (fts_query(query_terms(query)), TOP_K),
        ).fetchall()
        out.append((time.perf_counter() - started) * 1000)
    conn.close()
    return out


def run(*, quick: bool = False) -> dict[str, Any]:
    """Run the benchmark (``quick``: 3k notes), print the table, write the JSON; return it."""
    from afi.providers.memory import create_memory, create_memory_fabric

    size = 3_000 if quick else 100_000
    texts = corpus(size, seed=1)
    queries = queries_for(texts, 100 if quick else 500, seed=3)
    with tempfile.TemporaryDirectory(prefix="afi-bench-") as tmp:
        memory = create_memory(Path(tmp) / "recall.db", tenant_id="bench", resource_id="r", thread_id="t")
        fabric = create_memory_fabric(memory)
        load_base(fabric, texts)
        started = time.perf_counter()
        fabric.recall(queries[0], top_k=TOP_K)
        first_ms = (time.perf_counter() - started) * 1000
        fabric_ms = fabric_latencies(fabric, queries)
        memory.close()
        bm25_ms = bm25_latencies(Path(tmp) / "bm25.db", texts, queries)
    fp50, fp95 = percentile(fabric_ms, 50), percentile(fabric_ms, 95)
    bp50, bp95 = percentile(bm25_ms, 50), percentile(bm25_ms, 95)
    print_table(
        f"recall at {size:,} notes, top_k={TOP_K}, {len(queries)} queries (goal p50 <= {GOAL_P50_MS:.0f} ms)",
        ["retriever", "p50 ms", "p95 ms", "p50 vs baseline"],
        [
            ("fabric recall (hash + bm25 fused)", fp50, fp95, f"{fp50 / bp50:.2f}x"),
            ("sqlite fts5 bm25 only (baseline)", bp50, bp95, "1.00x"),
        ],
    )
    payload: dict[str, Any] = {
        "notes": size,
        "queries": len(queries),
        "top_k": TOP_K,
        "fabric": {"p50_ms": round(fp50, 2), "p95_ms": round(fp95, 2), "first_query_ms": round(first_ms, 1)},
        "bm25_baseline": {"p50_ms": round(bp50, 2), "p95_ms": round(bp95, 2)},
        "p50_ratio_vs_baseline": round(fp50 / bp50, 2),
        "goal_p50_ms": GOAL_P50_MS,
        "meets_goal": fp50 <= GOAL_P50_MS,
    }
    payload["comparisons"] = comparisons(
        *(
            comparison(
                f"recall {q} at {size:,} notes",
                "ms",
                "lower",
                ours=("afi-memory (hash + BM25)", payload["fabric"][f"{q}_ms"]),
                baseline=("FTS5 BM25 alone", payload["bm25_baseline"][f"{q}_ms"]),
            )
            for q in ("p50", "p95")
        )
    )
    write_result("recall", payload)
    return payload
