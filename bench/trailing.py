"""Writes of the default install (the MiniLM sentence embedder) with vectors made after the write,
beside the same writes embedding each note first (``vectors_after_write=False``, how every write ran
before), in one run, over one base, on SQLite and PostgreSQL.

For each engine and each way: single remembers with consolidation on (the latency a caller waits
for: p50 and p95), then ``remember_many`` in batches of ``BATCH``; after each, the time until every
vector of those notes is made (for the baseline, nothing: its writes made them). The acknowledged
rate is what a caller sees; the vectors' rate behind it is the embedder's, whatever the write does.

``python -m bench trailing [--quick] [--notes=N]`` (N: the base's notes): writes ``bench/results/trailing.json``.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from ._common import comparison, comparisons, corpus, percentile, print_table, write_result

__all__ = ["GOAL_BATCH_NOTES_PER_S", "GOAL_SINGLE_P50_MS", "run"]

GOAL_SINGLE_P50_MS = 15.0
GOAL_BATCH_NOTES_PER_S = 1_000.0
BATCH = 500


def _measure(url: str, embedder: Any, after: bool, singles: list[str], batched: list[str]) -> dict[str, Any]:
    from afi.providers.memory import create_memory, create_memory_fabric

    memory = create_memory(url, tenant_id="bench", resource_id="r", thread_id="t", embedder=embedder,
                           vectors_after_write=after)  # fmt: skip
    fabric = create_memory_fabric(memory)
    try:
        fabric.recall("warm the index and the model", top_k=1)
        latencies = []
        started = time.perf_counter()
        for text in singles:
            began = time.perf_counter()
            fabric.remember(kind="fact", content=text)
            latencies.append((time.perf_counter() - began) * 1000)
        single_s = time.perf_counter() - started
        single_fill_s = _until_filled(fabric)
        started = time.perf_counter()
        for at in range(0, len(batched), BATCH):
            fabric.remember_many([{"kind": "fact", "content": text} for text in batched[at : at + BATCH]])
        batch_s = time.perf_counter() - started
        batch_fill_s = _until_filled(fabric)
    finally:
        memory.close()
    return {
        "single_p50_ms": round(percentile(latencies, 50), 2),
        "single_p95_ms": round(percentile(latencies, 95), 2),
        "single_notes_per_s": round(len(singles) / single_s, 1),
        "single_vectors_done_s": round(single_s + single_fill_s, 2),
        "batch_notes_per_s": round(len(batched) / batch_s, 1),
        "batch_vectors_done_s": round(batch_s + batch_fill_s, 2),
        "vectors_notes_per_s": round(len(batched) / (batch_s + batch_fill_s), 1),
    }


def _until_filled(fabric: Any) -> float:
    """Seconds until the scope has no note without its vector (the thread and this call share the work)."""
    started = time.perf_counter()
    fabric.fill_vectors()
    memory = fabric.memory
    while memory.store.count_without_vectors(memory.scope):
        time.sleep(0.01)
    return time.perf_counter() - started


def run(*, quick: bool = False, notes: int | None = None) -> dict[str, Any]:
    """Run the benchmark (see the module); print the table, write the JSON, return it."""
    from afi.app.dbcopy import CopyPlan, copy_store
    from afi.providers.memory import OnnxMiniLM, create_memory, create_memory_fabric
    from tests.support.postgres import Databases, postgres_server

    from .engines import SERVER_SETTINGS

    base = notes or (1_000 if quick else 10_000)
    singles = corpus(60 if quick else 300, seed=2, prefix="single ")
    batched = corpus(500 if quick else 2_000, seed=3, prefix="batch ")
    results, rows = [], []
    with tempfile.TemporaryDirectory(prefix="afi-bench-") as tmp, postgres_server(settings=SERVER_SETTINGS) as server:
        databases = Databases(server)
        db = Path(tmp) / "base.db"
        memory = create_memory(db, tenant_id="bench", resource_id="r", thread_id="t", embedder=OnnxMiniLM())
        fabric = create_memory_fabric(memory)
        started = time.perf_counter()
        texts = corpus(base, seed=1)
        for at in range(0, base, BATCH):
            fabric.remember_many([{"kind": "fact", "content": t, "consolidate": False} for t in texts[at : at + BATCH]])
        fabric.fill_vectors()
        memory.close()
        print(f"base of {base:,} notes with their vectors in {time.perf_counter() - started:.0f} s")
        for engine in ("sqlite", "postgresql"):
            for after in (True, False):
                # each measurement on a fresh copy of the base, so both ways write into the same store
                if engine == "sqlite":
                    url = str(Path(tmp) / f"copy-{after}.db")
                    with sqlite3.connect(db) as source, sqlite3.connect(url) as copy:
                        source.backup(copy)  # the store as committed, its WAL included
                else:
                    url = databases.fresh()
                    copy_store(CopyPlan(db, url, batch=5000), lambda *_: None)
                measured = _measure(url, OnnxMiniLM(), after, singles, batched)
                way = "vectors after the write" if after else "embedded in the write"
                results.append({"engine": engine, "way": way, "base_notes": base, "n_single": len(singles),
                                "n_batch": len(batched), **measured})  # fmt: skip
                rows.append((engine, way, measured["single_p50_ms"], measured["single_p95_ms"],
                             measured["single_notes_per_s"], measured["batch_notes_per_s"],
                             measured["batch_vectors_done_s"]))  # fmt: skip
                if engine == "postgresql":
                    databases.drop(url)
        databases.close()
    print_table(
        f"remember with the default sentence embedder, {base:,}-note base, consolidation on "
        f"(goals: single p50 <= {GOAL_SINGLE_P50_MS:g} ms, batch >= {GOAL_BATCH_NOTES_PER_S:,.0f} notes/s)",
        ["engine", "way", "single p50 ms", "single p95 ms", "single /s", "batch /s", "batch: all vectors made, s"],
        rows,
    )
    by = {(r["engine"], r["way"]): r for r in results}
    pairs = []
    for engine in ("sqlite", "postgresql"):
        ours, before = by[(engine, "vectors after the write")], by[(engine, "embedded in the write")]
        pairs.append(comparison(f"single remember p50, {engine}, MiniLM, {base:,} notes", "ms", "lower",
                                ours=("vectors after the write", ours["single_p50_ms"]),
                                baseline=("embedded in the write", before["single_p50_ms"])))  # fmt: skip
        pairs.append(comparison(f"remember_many, {engine}, MiniLM, {base:,} notes", "notes/s", "higher",
                                ours=("vectors after the write", ours["batch_notes_per_s"]),
                                baseline=("embedded in the write", before["batch_notes_per_s"])))  # fmt: skip
    payload = {"goal_single_p50_ms": GOAL_SINGLE_P50_MS, "goal_batch_notes_per_s": GOAL_BATCH_NOTES_PER_S,
               "batch_size": BATCH, "results": results, "comparisons": comparisons(*pairs)}  # fmt: skip
    write_result("trailing", payload)
    return payload


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--notes", type=int, help="notes in the base store (default 10,000; --quick 1,000)")
    args = parser.parse_args()
    run(quick=args.quick, notes=args.notes)
