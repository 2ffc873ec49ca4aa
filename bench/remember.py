"""remember throughput with consolidation on, over 10k and 100k existing notes, beside AgentFS.

The base is loaded with ``consolidate=False`` inside one transaction (its rate is reported too),
then N new texts are remembered one by one with consolidation on: each is an exact search of the
nearest same-kind note plus the write. The scope's vector index is loaded once per process before
the timed writes and its load time is reported apart (as the recall benchmark does). Next to the
wall-clock rate, the process CPU rate: on a shared machine it is the steadier figure. In the same
run the AgentFS Python SDK writes the same N texts as files (its own SQLite), the nearest thing to
"store a memory" it offers.

``python -m bench.remember --batch [--quick] [--bases 10000,100000]`` measures the many-note remember
(``remember_many``, batches of ``BATCH`` notes: one embedding call and one transaction a batch) against
single remembers in the same run, over the same base, on SQLite and PostgreSQL (the SQLite base is
copied into a PostgreSQL store with ``afi db copy``), with the hash embedder and, at a small base, the
MiniLM sentence embedder. Both write new texts with consolidation on; the ratio is batch over single.

``python -m bench.remember --import [--quick]`` times ``afi import`` of a mem0 export of new memories
into a new store (the provider's ``import_foreign``: checked, then written in one transaction), in
notes per second; run it against two checkouts to compare their importers.
"""

from __future__ import annotations

import asyncio
import importlib.util
import tempfile
import time
from pathlib import Path
from typing import Any

from ._common import comparison, comparisons, corpus, print_table, write_result

__all__ = [
    "agentfs_rate",
    "batch_rate",
    "import_rate",
    "load_base",
    "remember_rate",
    "run",
    "run_batch",
    "run_import",
    "warm_index",
]

GOAL_NOTES_PER_S = 500.0
GOAL_BATCH_NOTES_PER_S = 1_000.0
BATCH = 500  # notes a remember_many


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


def batch_rate(fabric: Any, texts: list[str], size: int = BATCH) -> tuple[float, float]:
    """Given a fabric and new texts, remember them ``size`` at a time with ``remember_many`` (consolidation
    on); return notes per second of wall-clock time and of process CPU time."""
    started, cpu = time.perf_counter(), time.process_time()
    for at in range(0, len(texts), size):
        fabric.remember_many([{"kind": "fact", "content": text} for text in texts[at : at + size]])
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


def _single_and_batch(url: str, embedder: Any, singles: list[str], batched: list[str]) -> dict[str, Any]:
    """Over the store at ``url``: single remembers of ``singles``, then ``remember_many`` of ``batched``."""
    from afi.providers.memory import create_memory, create_memory_fabric

    memory = create_memory(url, tenant_id="bench", resource_id="r", thread_id="t", embedder=embedder)
    fabric = create_memory_fabric(memory)
    try:
        warm_ms = warm_index(fabric)
        single, single_cpu = remember_rate(fabric, singles)
        batch, batch_cpu = batch_rate(fabric, batched)
        ceiling = embed_rate(embedder, batched)
    finally:
        memory.close()
    return {
        "index_load_ms": round(warm_ms, 1),
        "embed_only_notes_per_s": round(ceiling, 1),
        "single_notes_per_s": round(single, 1),
        "single_cpu_notes_per_s": round(single_cpu, 1),
        "batch_notes_per_s": round(batch, 1),
        "batch_cpu_notes_per_s": round(batch_cpu, 1),
        "ratio": round(batch / single, 2),
        "meets_goal": batch >= GOAL_BATCH_NOTES_PER_S,
    }


def embed_rate(embedder: Any, texts: list[str]) -> float:
    """The embedder alone over ``texts``, ``BATCH`` a call as ``remember_many`` gives them: texts/s, the
    most a batch of writes could reach with this embedder whatever the store does."""
    started = time.perf_counter()
    for at in range(0, len(texts), BATCH):
        embedder.embed(texts[at : at + BATCH])
    return len(texts) / (time.perf_counter() - started)


def run_batch(*, quick: bool = False, bases: tuple[int, ...] | None = None,
              minilm_base: int = 1_000) -> dict[str, Any]:  # fmt: skip
    """Measure remember_many against single remembers (see the module) on both engines; print the table,
    write ``remember_batch.json``, return it."""
    from afi.app.dbcopy import CopyPlan, copy_store
    from afi.providers.memory import HashEmbedder, OnnxMiniLM, create_memory, create_memory_fabric
    from tests.support.postgres import Databases, postgres_server

    from .engines import SERVER_SETTINGS

    hash_bases = bases or ((1_000, 5_000) if quick else (10_000, 100_000))
    runs: list[tuple[str, Any, int, int, int]] = [
        ("hash", HashEmbedder, base, 200 if quick else 1_000, 1_000 if quick else 5_000) for base in hash_bases
    ]
    runs.append(("minilm", OnnxMiniLM, minilm_base, 50 if quick else 200, 500 if quick else 1_000))
    results, rows = [], []
    with tempfile.TemporaryDirectory(prefix="afi-bench-") as tmp, postgres_server(settings=SERVER_SETTINGS) as server:
        databases = Databases(server)
        for name, make, base, n_single, n_batch in runs:
            db = Path(tmp) / f"{name}-{base}.db"
            memory = create_memory(db, tenant_id="bench", resource_id="r", thread_id="t", embedder=make())
            load = load_base(create_memory_fabric(memory), corpus(base, seed=1))
            memory.close()
            pg_url = databases.fresh()
            copy_store(CopyPlan(db, pg_url, batch=5000), lambda *_: None)
            singles = corpus(n_single, seed=2, prefix="single ")
            batched = corpus(n_batch, seed=3, prefix="batch ")
            for engine, url in (("sqlite", str(db)), ("postgresql", pg_url)):
                measured = _single_and_batch(url, make(), singles, batched)
                result = {"embedder": name, "engine": engine, "base_notes": base, "n_single": n_single,
                          "n_batch": n_batch, "batch_size": BATCH, "base_load_notes_per_s": round(load, 1),
                          **measured}  # fmt: skip
                results.append(result)
                rows.append((name, engine, f"{base:,}", measured["index_load_ms"], measured["single_notes_per_s"],
                             measured["batch_notes_per_s"], measured["batch_cpu_notes_per_s"],
                             f"{measured['ratio']:.2f}x", measured["embed_only_notes_per_s"]))  # fmt: skip
            databases.drop(pg_url)
        databases.close()
    print_table(
        f"remember_many ({BATCH} a batch) against single remembers, consolidation on, goal >= "
        f"{GOAL_BATCH_NOTES_PER_S:,.0f} notes/s",
        [
            "embedder",
            "engine",
            "base notes",
            "index load ms",
            "single /s",
            "batch /s",
            "batch /s cpu",
            "ratio",
            "embedder alone /s",
        ],
        rows,
    )
    pairs = [
        comparison(
            f"remember_many, {r['engine']}, {r['embedder']}, {r['base_notes']:,} notes",
            "notes/s",
            "higher",
            ours=("remember_many", r["batch_notes_per_s"]),
            baseline=("single remember", r["single_notes_per_s"]),
        )
        for r in results
    ]
    payload = {"goal_batch_notes_per_s": GOAL_BATCH_NOTES_PER_S, "batch_size": BATCH, "results": results,
               "comparisons": comparisons(*pairs)}  # fmt: skip
    write_result("remember_batch", payload)
    return payload


def import_rate(folder: Path, store: str, texts: list[str], embedder: Any) -> float:
    """Given a scratch folder, a new store, texts and an embedder, import the texts as a mem0 export into
    the store's default space; return notes per second (the whole import: read, check, write)."""
    import json

    from afi.providers.memory.importers.foreign import import_foreign
    from afi.providers.memory.provider import MemoryProvider

    export = folder / "mem0.json"
    records = [
        {"id": f"m{i}", "memory": text, "categories": ["bench"], "created_at": "2026-01-01T00:00:00Z", "user_id": "u"}
        for i, text in enumerate(texts)
    ]
    export.write_text(json.dumps(records))
    provider = MemoryProvider(store, folder / "files", embedder=embedder)
    provider.fabric("default").recall("load the index", top_k=1)
    started = time.perf_counter()
    report = import_foreign(provider, export, fmt="mem0", space="default")
    rate = len(texts) / (time.perf_counter() - started)
    if report.created != len(texts):
        raise SystemExit(f"the import created {report.created} notes of {len(texts)}")
    return rate


def run_import(*, quick: bool = False) -> dict[str, Any]:
    """Time ``afi import`` of a mem0 export (see the module) on both engines; print, write ``remember_import.json``."""
    from afi.providers.memory import HashEmbedder, OnnxMiniLM
    from tests.support.postgres import Databases, postgres_server

    from .engines import SERVER_SETTINGS

    runs = [("hash", HashEmbedder, 500 if quick else 2_000), ("minilm", OnnxMiniLM, 100 if quick else 500)]
    results, rows = [], []
    with tempfile.TemporaryDirectory(prefix="afi-bench-") as tmp, postgres_server(settings=SERVER_SETTINGS) as server:
        databases = Databases(server)
        for name, make, n in runs:
            texts = corpus(n, seed=5, prefix="imported ")
            for engine in ("sqlite", "postgresql"):
                folder = Path(tmp) / f"{name}-{engine}"
                folder.mkdir()
                store = str(folder / "afi.db") if engine == "sqlite" else databases.fresh()
                rate = import_rate(folder, store, texts, make())
                results.append({"embedder": name, "engine": engine, "notes": n, "import_notes_per_s": round(rate, 1)})
                rows.append((name, engine, n, rate))
        databases.close()
    print_table("afi import of a mem0 export into a new store", ["embedder", "engine", "notes", "notes /s"], rows)
    payload = {"results": results}
    write_result("remember_import", payload)
    return payload


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--batch", action="store_true", help="remember_many against single remembers")
    parser.add_argument("--bases", help="comma-separated base sizes for --batch (hash embedder)")
    parser.add_argument("--minilm-base", type=int, default=1_000, help="the MiniLM base size for --batch")
    parser.add_argument("--import", dest="imports", action="store_true", help="afi import of a mem0 export")
    args = parser.parse_args()
    if args.imports:
        run_import(quick=args.quick)
    elif args.batch:
        run_batch(
            quick=args.quick,
            bases=tuple(int(b) for b in args.bases.split(",")) if args.bases else None,
            minilm_base=args.minilm_base,
        )
    else:
        run(quick=args.quick)
