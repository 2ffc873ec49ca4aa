"""remember throughput with consolidation on, over 10k and 100k existing notes, beside AgentFS.

The base is loaded with ``consolidate=False`` inside one transaction (its rate is reported too),
then N new texts are remembered one by one with consolidation on: each is an exact search of the
nearest same-kind note plus the write. The scope's vector index is loaded once per process before
the timed writes and its load time is reported apart (as the recall benchmark does). Next to the
wall-clock rate, the process CPU rate: on a shared machine it is the steadier figure. In the same
run the AgentFS Python SDK writes the same N texts as files (its own SQLite), the nearest thing to
"store a memory" it offers.
"""

from __future__ import annotations

import asyncio
import importlib.util
import tempfile
import time
from pathlib import Path
from typing import Any

from ._common import comparison, comparisons, corpus, print_table, write_result

__all__ = ["agentfs_rate", "load_base", "remember_rate", "run", "warm_index"]

GOAL_NOTES_PER_S = 500.0


def load_base(fabric: Any, texts: list[str]) -> float:
    """Given a fabric and texts, store them as facts without consolidation; return notes per second."""
    started = time.perf_counter()
    with fabric.memory.store.write():  # one transaction: the base load is not what is measured
        for text in texts:
            fabric.remember(kind="fact", content=text, consolidate=False)
    return len(texts) / (time.perf_counter() - started)


def warm_index(fabric: Any) -> float:
    """Given a fabric, load its scope's vector index (once per process); return the milliseconds taken."""
    started = time.perf_counter()
    fabric.recall("warm the index", top_k=1)
    return (time.perf_counter() - started) * 1000


def remember_rate(fabric: Any, texts: list[str]) -> tuple[float, float]:
    """Given a fabric and new texts, remember each with consolidation on; return notes per second
    of wall-clock time and of process CPU time."""
    started, cpu = time.perf_counter(), time.process_time()
    for text in texts:
        fabric.remember(kind="fact", content=text)
    return len(texts) / (time.perf_counter() - started), len(texts) / (time.process_time() - cpu)


def agentfs_rate(db: Path, texts: list[str]) -> float | None:
    """Given a fresh file and texts, write each as one AgentFS file; return files per second (None if absent)."""
    if importlib.util.find_spec("agentfs_sdk") is None:
        return None
    from agentfs_sdk import AgentFS, AgentFSOptions

    async def write_all() -> float:
        agent = await AgentFS.open(AgentFSOptions(path=str(db)))
        try:
            started = time.perf_counter()
            for i, text in enumerate(texts):
                await agent.fs.write_file(f"/memories/note-{i:06d}.md", text)
            return len(texts) / (time.perf_counter() - started)
        finally:
            await agent.close()

    return asyncio.run(write_all())


def run(*, quick: bool = False) -> dict[str, Any]:
    """Run the benchmark (``quick``: 1k/5k bases, 300 writes), print the table, write the JSON; return it."""
    from afi.providers.memory import create_memory, create_memory_fabric

    bases = (1_000, 5_000) if quick else (10_000, 100_000)
    n = 300 if quick else 2_000
    new_texts = corpus(n, seed=2, prefix="new ")
    rows, results = [], []
    with tempfile.TemporaryDirectory(prefix="afi-bench-") as tmp:
        for base in bases:
            memory = create_memory(Path(tmp) / f"base-{base}.db", tenant_id="bench", resource_id="r", thread_id="t")
            fabric = create_memory_fabric(memory)
            load = load_base(fabric, corpus(base, seed=1))
            warm_ms = warm_index(fabric)
            rate, cpu_rate = remember_rate(fabric, new_texts)
            # Measured right after the fabric on the same machine state, so the ratio is like for like.
            afs = agentfs_rate(Path(tmp) / f"agentfs-{base}.db", new_texts)
            count = len(fabric.memory.store.select_notes(memory.scope, "kind = 'fact'"))
            memory.close()
            result = {
                "base_notes": base,
                "n": n,
                "base_load_notes_per_s": round(load, 1),
                "index_load_ms": round(warm_ms, 1),
                "remember_notes_per_s": round(rate, 1),
                "remember_cpu_notes_per_s": round(cpu_rate, 1),
                "agentfs_files_per_s": None if afs is None else round(afs, 1),
                "ratio_vs_agentfs": None if afs is None else round(rate / afs, 2),
                "notes_after": count,
                "meets_goal": rate >= GOAL_NOTES_PER_S,
            }
            results.append(result)
            ratio = "-" if afs is None else f"{rate / afs:.2f}x"
            rows.append((f"{base:,}", n, load, warm_ms, rate, cpu_rate, "-" if afs is None else afs, ratio, count))
    print_table(
        f"remember (consolidation on), goal >= {GOAL_NOTES_PER_S:.0f} notes/s",
        [
            "base notes",
            "N",
            "base load /s",
            "index load ms",
            "remember /s",
            "remember /s cpu",
            "AgentFS files /s",
            "vs AgentFS",
            "notes after",
        ],
        rows,
    )
    pairs = [
        comparison(
            f"remember with consolidation, {r['base_notes']:,} notes",
            "notes/s",
            "higher",
            ours=("afi-memory", r["remember_notes_per_s"]),
            baseline=("AgentFS SDK (files/s)", r["agentfs_files_per_s"]),
        )
        for r in results
    ]
    payload = {"goal_notes_per_s": GOAL_NOTES_PER_S, "results": results, "comparisons": comparisons(*pairs)}
    write_result("remember", payload)
    return payload
