"""Recall in a store of the default sentence embedder (MiniLM), its vector search cut by sign bits beside exact.

``python -m bench recall_dense [--quick] [--notes=N]``, or ``python -m bench.recall_dense [--notes N]
[--store PATH] [--engines sqlite,postgresql]``. N of ``bench.engines``' notes (100,000; 1,000 with
``--quick``, the cut then past 500 rows) are remembered with MiniLM into a SQLite store and every
vector made (with ``--store``, built there once: about 20 minutes for 100k notes on 2 cores, and
kept); each run measures a copy.
On SQLite the same queries (3-5 words of stored notes) are recalled twice in one process, with the
vector search scored exactly over every row and with the sign-bit cut (``fabric/sign_bits.py``: the
rows nearest by their signs, then scored exactly), and reported: recall p50 and p95, how many of the
exact vector search's top 10 the cut kept, how many of recall's top 10 notes were the same, beside
FTS5 BM25 alone over the same texts and the query's embedding alone. With ``postgresql`` in
``--engines`` the store is copied (``afi db copy``) and recalled there too (its HNSW index), as recall
asks PostgreSQL and, alternately, one part after another (the baseline).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from ._common import RESULTS_DIR, comparison, comparisons, percentile, print_table, write_result
from .engines import SERVER_SETTINGS, texts
from .recall import bm25_latencies, queries_for

DEFAULT_NOTES = 100_000
BEFORE = "HNSW, parts one after another (before)"  # PostgreSQL's baseline way
TOP_K = 10


def _fabric(path: str) -> Any:
    from afi.providers.memory import OnnxMiniLM, create_memory_fabric
    from afi.providers.memory.fabric.memory import space_memory

    return create_memory_fabric(space_memory(path, "default", embedder=OnnxMiniLM()))


def build(store: Path, n: int) -> None:
    """Remember n notes with MiniLM and make every vector; the store appears at ``store`` once whole."""
    partial = store.with_name(store.name + ".building")
    partial.unlink(missing_ok=True)
    fabric = _fabric(str(partial))
    corpus = texts(n)
    for at in range(0, n, 500):
        fabric.remember_many(
            [{"kind": "fact", "content": text, "consolidate": False} for text in corpus[at : at + 500]]
        )
    fabric.fill_vectors()
    fabric.memory.close()
    with contextlib.closing(sqlite3.connect(partial)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    partial.replace(store)


def _vector_tops(fabric: Any, queries: list[str]) -> list[list[int]]:
    """Each query's top rowids by the vector search alone, as recall's vector side asks it."""
    memory = fabric.memory
    index = memory.index
    out = []
    for query in queries:
        qvec = memory.embedder.embed([query])[0]
        with index.lock:
            index.refresh()
            out.append([rowid for rowid, _ in index.top(qvec, index.mask(["fact"], 2e9, False), TOP_K)])
    return out


def _recalls(fabric: Any, queries: list[str]) -> tuple[list[float], list[list[str]]]:
    latencies, hits = [], []
    for query in queries:
        started = time.perf_counter()
        found = fabric.recall(query, top_k=TOP_K)
        latencies.append((time.perf_counter() - started) * 1000)
        hits.append([hit.id for hit in found.hits])
    return latencies, hits


def _overlap(ours: list[list[Any]], exact: list[list[Any]]) -> float:
    kept = sum(len(set(a) & set(b)) for a, b in zip(ours, exact, strict=True))
    return round(100.0 * kept / max(1, sum(len(b) for b in exact)), 1)


def run(*, quick: bool = False, notes: int | None = None, store: Path | None = None,
        engines: tuple[str, ...] = ("sqlite", "postgresql"),
        results_dir: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """Build (or copy the kept) store, measure; print the table, write the JSON, return it."""
    n = notes or (1_000 if quick else DEFAULT_NOTES)
    queries = queries_for(texts(n), 50 if quick else 300, seed=3)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="afi-bench-") as tmp:
        db = Path(tmp) / "afi.db"
        if store is None:
            build(db, n)
        else:
            if not store.exists():
                build(store, n)
            shutil.copyfile(store, db)
        fabric = _fabric(str(db))
        embed_ms = []
        for query in queries:
            started = time.perf_counter()
            fabric.memory.embedder.embed([query])
            embed_ms.append((time.perf_counter() - started) * 1000)
        index = fabric.memory.index
        results: dict[str, tuple[list[float], list[list[str]], list[list[int]]]] = {}
        for way, prefilter in (("exact", 1 << 62), ("sign-bit cut", min(index.prefilter_rows, n // 2))):
            index.prefilter_rows = prefilter  # one process, one store, both ways
            fabric.recall(queries[0], top_k=TOP_K)  # warm: the scope's vectors (and bits) loaded
            tops = _vector_tops(fabric, queries)
            latencies, hits = _recalls(fabric, queries)
            results[way] = (latencies, hits, tops)
        fabric.memory.close()
        exact_hits, exact_tops = results["exact"][1], results["exact"][2]
        for way, (latencies, hits, tops) in results.items():
            rows.append({"engine": "sqlite", "way": way, "p50_ms": round(percentile(latencies, 50), 2),
                         "p95_ms": round(percentile(latencies, 95), 2),
                         "vector_top10_kept_pct": _overlap(tops, exact_tops),
                         "recall_top10_same_pct": _overlap(hits, exact_hits)})  # fmt: skip
        if "postgresql" in engines:
            rows += _postgres(db, queries, exact_hits)
        bm25 = bm25_latencies(Path(tmp) / "bm25.db", texts(n), queries)
    rows.append({"engine": "sqlite", "way": "FTS5 BM25 alone (baseline)", "p50_ms": round(percentile(bm25, 50), 2),
                 "p95_ms": round(percentile(bm25, 95), 2)})  # fmt: skip
    columns = ["engine", "way", "p50_ms", "p95_ms", "vector_top10_kept_pct", "recall_top10_same_pct",
               "top10_same_as_before_pct"]  # fmt: skip
    print_table(f"recall at {n:,} MiniLM notes, top_k={TOP_K}, {len(queries)} queries; the query's embedding "
                f"alone p50 {percentile(embed_ms, 50):.2f} ms", columns,
                [[row.get(c, "") for c in columns] for row in rows])  # fmt: skip
    by = {(row["engine"], row["way"]): row for row in rows}
    payload: dict[str, Any] = {"notes": n, "queries": len(queries), "top_k": TOP_K, "results": rows,
                               "embed_query_p50_ms": round(percentile(embed_ms, 50), 2)}  # fmt: skip
    cut, exact, bm25_row = (
        by[("sqlite", "sign-bit cut")],
        by[("sqlite", "exact")],
        by[("sqlite", "FTS5 BM25 alone (baseline)")],
    )
    pairs = [
        comparison(f"recall p50, {n:,} MiniLM notes, SQLite", "ms", "lower",
                   ours=("sign-bit cut", cut["p50_ms"]), baseline=("exact vector scan", exact["p50_ms"])),
        comparison(f"recall p50 beside BM25 alone, {n:,} notes", "ms", "lower",
                   ours=("afi-memory recall, sign-bit cut", cut["p50_ms"]), baseline=("FTS5 BM25", bm25_row["p50_ms"])),
    ]  # fmt: skip
    if ("postgresql", "HNSW") in by:
        pg, before = by[("postgresql", "HNSW")]["p50_ms"], by[("postgresql", BEFORE)]["p50_ms"]
        pairs.append(
            comparison(
                f"recall p50, {n:,} MiniLM notes, PostgreSQL beside SQLite",
                "ms",
                "lower",
                ours=("PostgreSQL (HNSW)", pg),
                baseline=("SQLite (sign-bit cut)", cut["p50_ms"]),
            )
        )
        pairs.append(comparison(f"recall p50, {n:,} MiniLM notes, PostgreSQL", "ms", "lower",
                                ours=("rankings filtered in SQL, asked at once", pg),
                                baseline=("one part after another (before)", before)))  # fmt: skip
    payload["comparisons"] = comparisons(*pairs)
    write_result("recall_dense", payload, results_dir)
    return payload


def _postgres(db: Path, queries: list[str], exact_hits: list[list[str]]) -> list[dict[str, Any]]:
    """The store copied into PostgreSQL, recalled two ways a query at a time, alternately: as it is
    recalled (both rankings filtered in SQL, the query embedded and the HNSW graph asked beside the
    BM25 ranking) and, as the baseline, one part after another with the BM25 ranking filtered in the
    process (the way recall asked PostgreSQL before)."""
    from afi.app.dbcopy import CopyPlan, copy_store
    from tests.support.postgres import Databases, postgres_server

    ways = {"HNSW": True, BEFORE: False}
    latencies: dict[str, list[float]] = {way: [] for way in ways}
    hits: dict[str, list[list[str]]] = {way: [] for way in ways}
    with postgres_server(settings=SERVER_SETTINGS) as server_url:
        url = Databases(server_url).fresh()
        copy_store(CopyPlan(db, url, batch=5000), lambda table, done, total: None)
        fabric = _fabric(url)
        index = fabric.memory.index
        try:
            fabric.recall(queries[0], top_k=TOP_K)
            for at, query in enumerate(queries):
                order = list(ways) if at % 2 == 0 else list(reversed(ways))
                for way in order:
                    index.in_database = ways[way]  # False: recall asks it as it asks the process's matrix
                    started = time.perf_counter()
                    found = fabric.recall(query, top_k=TOP_K)
                    latencies[way].append((time.perf_counter() - started) * 1000)
                    hits[way].append([hit.id for hit in found.hits])
        finally:
            fabric.memory.close()
    rows = [{"engine": "postgresql", "way": way, "p50_ms": round(percentile(latencies[way], 50), 2),
             "p95_ms": round(percentile(latencies[way], 95), 2),
             "recall_top10_same_pct": _overlap(hits[way], exact_hits)} for way in ways]  # fmt: skip
    rows[0]["top10_same_as_before_pct"] = _overlap(hits["HNSW"], hits[BEFORE])  # the same answers, sooner
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--notes", type=int)
    parser.add_argument("--store", type=Path, help="a MiniLM SQLite store to build once and measure copies of")
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    run(quick=args.quick, notes=args.notes, store=args.store, engines=tuple(args.engines.split(",")),
        results_dir=args.results_dir)  # fmt: skip
