"""The observational ledger: append throughput, ``search_conversation`` latency, LoCoMo recall@k.

``python -m bench.ledger [--entries 100000] [--queries 50] [--quick] [--results-dir DIR]``

- Appends: ``entries`` messages into one session through ``append_many`` (batches of 5,000, one
  transaction each, FTS5 included). Baseline in the same run: the same rows through a bare
  ``executemany`` into a table with no index, so the figure is also a ratio.
- Search: ``search_conversation`` (FTS5 candidates, coverage scoring, pages) over that branch, p50/p95
  over ``queries`` two-term queries. Baseline in the same run: the plain scan path (every message
  scored in Python, the fabric's fallback for a non-ledger source) over the same entries.
- LoCoMo dev (data/locomo/README.md): each conversation one session, each turn one message
  (``"<speaker> (<session date>): <text>"`` plus the image caption) with its dia_id as entry id; every
  category 1-4 question is one ``search_conversation`` (top_k 10); recall@k against the evidence
  dia_ids. BM25 over the same turns is the in-run baseline.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from afi.providers.memory import MemoryValidationError, create_ledger
from afi.providers.memory.ledger.conversation import LedgerSource, search_conversation

from ._common import comparison, comparisons, corpus, percentile, print_table, write_result
from .locomo import KS, bm25_rankings, load_conversations, recall_at

BATCH = 5000


class _PlainSource:
    """The branch as a list: what a non-ledger host session looks like to the fabric."""

    def __init__(self, entries: list[dict[str, Any]]) -> None:
        self.session = self
        self.id = "bench"
        self._entries = entries

    def entries(self) -> list[dict[str, Any]]:
        return self._entries


def _appends(db: Path, texts: list[str]) -> dict[str, Any]:
    ledger = create_ledger(db=db)
    session = ledger.session("bench")
    started = time.perf_counter()
    for start in range(0, len(texts), BATCH):
        session.append_many(
            {"role": "user" if i % 2 == 0 else "assistant", "text": texts[i], "entry_id": f"e{i}",
             "timestamp": f"2026-01-01T00:00:00.{i % 1000:03d}Z"}
            for i in range(start, min(start + BATCH, len(texts)))
        )  # fmt: skip
    seconds = time.perf_counter() - started
    raw = sqlite3.connect(db.with_suffix(".raw.db"), isolation_level=None)
    raw.execute("PRAGMA journal_mode = WAL")
    raw.execute("CREATE TABLE t (id TEXT, role TEXT, text TEXT, ts TEXT)")
    started = time.perf_counter()
    for start in range(0, len(texts), BATCH):
        raw.execute("BEGIN")
        rows = ((f"e{i}", "user", texts[i], "t") for i in range(start, min(start + BATCH, len(texts))))
        raw.executemany("INSERT INTO t VALUES (?,?,?,?)", rows)
        raw.execute("COMMIT")
    raw_seconds = time.perf_counter() - started
    raw.close()
    return {"entries": len(texts), "seconds": seconds, "per_second": len(texts) / seconds,
            "baseline_per_second": len(texts) / raw_seconds, "ratio_to_baseline": raw_seconds / seconds}  # fmt: skip


def _searches(db: Path, n_queries: int, scan_queries: int) -> dict[str, Any]:
    session = create_ledger(db=db).session("bench")
    source = LedgerSource(session)
    rng = random.Random(7)
    words = " ".join(corpus(50, seed=3)).split()
    queries = [f"{rng.choice(words)} {rng.choice(words)}" for _ in range(n_queries)]
    search_conversation(source, queries[0], limit=10)  # warm the page cache
    times, scanned = [], []
    for query in queries:
        started = time.perf_counter()
        result = search_conversation(source, query, limit=10, top_k=5)
        times.append((time.perf_counter() - started) * 1000)
        scanned.append(result.scanned)
    plain = _PlainSource(session.entries())
    scan_times = []
    for query in queries[:scan_queries]:
        started = time.perf_counter()
        slow = search_conversation(plain, query, limit=10, top_k=5)
        scan_times.append((time.perf_counter() - started) * 1000)
        fast = search_conversation(source, query, limit=10, top_k=5)
        if [h.entry_id for h in slow.hits] != [h.entry_id for h in fast.hits]:
            raise AssertionError(f"the index and the scan disagree on {query!r}")
    p50 = percentile(times, 50)
    return {"queries": n_queries, "p50_ms": p50, "p95_ms": percentile(times, 95),
            "mean_scanned": statistics.mean(scanned), "scan_baseline_p50_ms": percentile(scan_times, 50),
            "speedup_over_scan": percentile(scan_times, 50) / p50}  # fmt: skip


def _locomo(db: Path, quick: bool) -> dict[str, Any]:
    conversations = load_conversations(only=["conv-30"] if quick else None)
    ledger = create_ledger(db=db)
    ours, base, questions = [], [], []
    for conv in conversations:
        session = ledger.session(conv.sample_id)
        session.append_many(
            {"role": "user", "text": text, "entry_id": dia_id, "timestamp": _stamp(i)}
            for i, (dia_id, text) in enumerate(conv.turns)
        )
        source = LedgerSource(session)
        for q in conv.questions:
            try:
                result = search_conversation(source, q.text, limit=1, top_k=max(KS))
                ours.append([h.entry_id for h in result.hits])
            except MemoryValidationError:  # a question with no term of two characters: nothing retrieved
                ours.append([])
        base += bm25_rankings(conv, max(KS))
        questions += conv.questions
    mine, bm25 = recall_at(ours, questions), recall_at(base, questions)
    return {"n": len(questions), "conversations": [c.sample_id for c in conversations],
            "search_conversation": {f"recall@{k}": v for k, v in mine.items()},
            "bm25 (baseline)": {f"recall@{k}": v for k, v in bm25.items()}}  # fmt: skip


def _stamp(i: int) -> str:
    # turns are stored in conversation order; a later turn gets a later time (ties go to the newest)
    return f"2023-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.000Z"


def run(
    *, quick: bool = False, entries: int = 100_000, queries: int = 50, results_dir: Path | None = None
) -> dict[str, Any]:
    """Run the three parts, print the tables, write ``ledger.json``; return the figures."""
    n = 5_000 if quick else entries
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "ledger.db"
        appends = _appends(db, corpus(n, seed=11))
        searches = _searches(db, 10 if quick else queries, 3 if quick else 5)
        locomo = _locomo(Path(tmp) / "locomo.db", quick)
    print_table("ledger appends", ["entries", "per second", "baseline per second", "ratio"],
                [(appends["entries"], appends["per_second"], appends["baseline_per_second"],
                  appends["ratio_to_baseline"])])  # fmt: skip
    print_table("search_conversation", ["queries", "p50 ms", "p95 ms", "mean scanned", "scan p50 ms", "speedup"],
                [(searches["queries"], searches["p50_ms"], searches["p95_ms"], searches["mean_scanned"],
                  searches["scan_baseline_p50_ms"], searches["speedup_over_scan"])])  # fmt: skip
    rows = [(name, locomo["n"], *(locomo[name][f"recall@{k}"] for k in KS))
            for name in ("search_conversation", "bm25 (baseline)")]  # fmt: skip
    print_table("LoCoMo dev: recall@k (%)", ["retriever", "n", *(f"@{k}" for k in KS)], rows)
    payload: dict[str, Any] = {"appends": appends, "search": searches, "locomo": locomo}
    payload["comparisons"] = comparisons(
        comparison(
            f"append {appends['entries']:,} entries",
            "entries/s",
            "higher",
            ours=("ledger append_many (FTS5 included)", appends["per_second"]),
            baseline=("bare executemany, no index", appends["baseline_per_second"]),
        ),
        comparison(
            f"search_conversation p50 over {appends['entries']:,} entries",
            "ms",
            "lower",
            ours=("search_conversation", searches["p50_ms"]),
            baseline=("a Python scan of the branch", searches["scan_baseline_p50_ms"]),
        ),
        *(
            comparison(
                f"LoCoMo recall@{k}",
                "% of evidence",
                "higher",
                ours=("search_conversation", locomo["search_conversation"][f"recall@{k}"]),
                baseline=("BM25", locomo["bm25 (baseline)"][f"recall@{k}"]),
            )
            for k in KS
        ),
    )
    write_result("ledger", payload, results_dir)
    return payload


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ledger", description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--results-dir", type=Path)
    args = parser.parse_args(argv)
    run(quick=args.quick, entries=args.entries, queries=args.queries, results_dir=args.results_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
