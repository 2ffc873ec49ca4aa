"""Both engines side by side, one run: the same notes in a SQLite file and in PostgreSQL.

``python -m bench engines [--quick] [--notes=N]``, or ``python -m bench.engines [--quick] [--notes N]
[--store PATH]``. N notes of about 200 characters (every one carries a token shared by 100 notes, so
an exact search for it is selective) are remembered into a SQLite store (no consolidation, one
transaction), then bulk-loaded into PostgreSQL with ``afi db copy`` (COPY, indexes built once at the
end). With ``--store``, that SQLite store is built there once and kept: a later run measures a copy of
it (the same N notes each time) and skips the build, whose rate it then does not report. On each engine, in turn:

- **remember** with consolidation on (new notes, one by one, through the fabric);
- **recall** p50 (the fabric's hybrid recall: BM25 and vectors);
- **exact** and **regex** search, first page, p50, through ``afi serve``'s HTTP door, as a user meets it;
- **bytes per note** on disk (the SQLite file after a checkpoint; the PostgreSQL database's size less
  an empty store's);
- **resident memory** of that ``afi serve`` process (RSS and PSS) after the searches and 50 semantic
  searches.

``--quick``: 2,000 notes unless ``--notes``; on each engine 50 remembered (else 1,000), 20 recalls (200),
20 semantic searches (50), 10 exact and 10 regex ones (100 each).

The PostgreSQL server runs durable, with ``shared_buffers`` 2 GB and ``max_wal_size`` 4 GB (``SERVER_SETTINGS``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from ._common import comparison, comparisons, corpus, percentile, print_table, write_result

DEFAULT_NOTES = 100_000
SHARED = 100  # notes carrying each selective token
# PostgreSQL set as an operator sets a server (its defaults are for small machines): a buffer cache of a
# quarter of an 8 GB host, and checkpoints far enough apart that a write loop is not mostly full-page
# images. The afi serve process's memory is measured apart from the server's.
SERVER_SETTINGS = {"shared_buffers": "2GB", "max_wal_size": "4GB", "checkpoint_timeout": "15min"}


def texts(n: int, *, seed: int = 7) -> list[str]:
    """n notes of about 200 characters; note i ends with the token ``zq<i mod n/100>x``."""
    sentences = corpus(2 * n, seed=seed)
    groups = max(1, n // SHARED)
    out = []
    for i in range(n):
        tag = f" zq{i % groups}x"
        out.append(f"{sentences[2 * i]} {sentences[2 * i + 1]}"[: 200 - len(tag)] + tag)
    return out


def _fabric(db: str) -> Any:
    from afi.providers.memory import create_memory_fabric
    from afi.providers.memory.fabric.memory import space_memory

    return create_memory_fabric(space_memory(db, "default"))


def _timed(fn: Any, runs: int) -> float:
    samples = []
    for i in range(runs):
        started = time.perf_counter()
        fn(i)
        samples.append((time.perf_counter() - started) * 1000)
    return round(percentile(samples, 50), 2)


def _memory(pid: int) -> tuple[float, float]:
    """RSS and PSS of a process, in MiB."""
    values = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            parts = line.split()
            if parts and parts[0] in ("Rss:", "Pss:"):
                values[parts[0]] = int(parts[1]) / 1024
    return round(values.get("Rss:", 0.0), 1), round(values.get("Pss:", 0.0), 1)


def _engine(name: str, db: str, root: Path, n: int, quick: bool, bytes_per_note: float) -> dict[str, Any]:
    from tests.support.servers import start_afi_serve

    fabric = _fabric(db)
    fresh = texts(50 if quick else 1000, seed=99)
    fabric.recall("warm up", top_k=1)
    started = time.perf_counter()
    for text in fresh:
        fabric.remember(kind="fact", content=text)
    remember_rate = len(fresh) / (time.perf_counter() - started)
    rng = random.Random(3)
    queries = [" ".join(rng.sample(t.split(), 4)) for t in rng.sample(fresh, 20 if quick else 200)]
    recall_p50 = _timed(lambda i: fabric.recall(queries[i % len(queries)], top_k=10), len(queries))
    groups = max(1, n // SHARED)
    tokens = [f"zq{rng.randrange(groups)}x" for _ in range(10 if quick else 100)]

    with start_afi_serve(db, root) as server, httpx.Client(base_url=server.url, timeout=60) as client:

        def search(body: dict[str, Any]) -> None:
            response = client.post("/afi/search", json={"path": "/facts", "limit": 100, **body})
            response.raise_for_status()

        search({"query": tokens[0]})  # warm
        exact_p50 = _timed(lambda i: search({"query": tokens[i]}), len(tokens))
        regex_p50 = _timed(lambda i: search({"query": {"regex": tokens[i].replace("x", "[x]")}}), len(tokens))
        semantic_p50 = _timed(lambda i: search({"query": {"semantic": queries[i]}, "limit": 10}), min(50, len(queries)))
        assert server.process is not None
        rss, pss = _memory(server.process.pid)
    return {
        "engine": name,
        "remember_per_s": round(remember_rate, 1),
        "recall_p50_ms": recall_p50,
        "exact_p50_ms": exact_p50,
        "regex_p50_ms": regex_p50,
        "semantic_http_p50_ms": semantic_p50,
        "bytes_per_note": round(bytes_per_note),
        "serve_rss_mib": rss,
        "serve_pss_mib": pss,
    }


def _sqlite_bytes(db: Path, n: int) -> float:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db.stat().st_size / n


def _pg_bytes(url: str, empty: str, n: int) -> float:
    import psycopg

    sizes: list[int] = []
    for each in (url, empty):
        with psycopg.connect(each, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE")
            size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
            sizes.append(int(size[0]) if size else 0)
    return (sizes[0] - sizes[1]) / n


def _build_sqlite(db: Path, n: int) -> float:
    """Remember the bench's n notes into a new SQLite store at db, one transaction; return notes/s."""
    fabric = _fabric(str(db))
    started = time.perf_counter()
    with fabric.memory.store.write():
        for text in texts(n):
            fabric.remember(kind="fact", content=text, consolidate=False)
    rate = n / (time.perf_counter() - started)
    fabric.memory.store.close()
    return rate


def _check_kept(store: Path, n: int) -> None:
    """Refuse a kept store that holds another number of notes than n (a store not built yet passes)."""
    if not store.exists():
        return
    with contextlib.closing(sqlite3.connect(store)) as conn:
        held = conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0]
    if held != n:
        raise SystemExit(f"{store} holds {held:,} notes, not {n:,}: give --notes={held} or another --store")


def _kept_store(store: Path, db: Path, n: int) -> float | None:
    """Copy the kept store to db, building it first when absent; return the build's notes/s (None: reused)."""
    rate = None
    if not store.exists():
        partial = store.with_name(store.name + ".building")
        partial.unlink(missing_ok=True)
        rate = _build_sqlite(partial, n)
        with contextlib.closing(sqlite3.connect(partial)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        partial.replace(store)
    _check_kept(store, n)
    shutil.copyfile(store, db)
    return rate


def run(*, quick: bool = False, notes: int | None = None, store: Path | None = None) -> dict[str, Any]:
    """Build (or copy the kept) SQLite store and its PostgreSQL copy, measure both engines; print the
    table, write the JSON, return it."""
    from afi.app.dbcopy import CopyPlan, copy_store, verify_copy
    from tests.support.postgres import Databases, postgres_server

    n = notes or (2_000 if quick else DEFAULT_NOTES)
    if store is not None:
        _check_kept(store, n)  # before PostgreSQL starts
    with tempfile.TemporaryDirectory() as tmp, postgres_server(settings=SERVER_SETTINGS) as server_url:
        base = Path(tmp)
        sqlite_db, root = base / "afi.db", base / "files"
        databases = Databases(server_url)
        pg_url, empty = databases.fresh(), databases.fresh()
        sqlite_load = _build_sqlite(sqlite_db, n) if store is None else _kept_store(store, sqlite_db, n)
        marks: dict[str, float] = {}
        started = time.perf_counter()

        def mark(table: str, done: int, total: int) -> None:
            marks.setdefault(f"{table}:{done >= total}", time.perf_counter())

        copy_store(CopyPlan(sqlite_db, pg_url, batch=5000), mark)
        copy_seconds = time.perf_counter() - started
        index_seconds = marks.get("(indexes):True", 0.0) - marks.get("(indexes):False", 0.0)
        notes_seconds = marks.get("notes:True", 0.0) - marks.get("notes:False", 0.0)
        assert all(check.ok for check in verify_copy(CopyPlan(sqlite_db, pg_url)))
        sqlite_bytes = _sqlite_bytes(sqlite_db, n)
        pg_bytes = _pg_bytes(pg_url, empty, n)
        rows = [
            _engine("sqlite", str(sqlite_db), root, n, quick, sqlite_bytes),
            _engine("postgresql", pg_url, root, n, quick, pg_bytes),
        ]
    load = {
        "notes": n,
        "sqlite_remember_load_per_s": None if sqlite_load is None else round(sqlite_load, 1),
        "postgres_copy_notes_per_s": round(n / notes_seconds, 1) if notes_seconds > 0 else None,
        "postgres_index_build_s": round(index_seconds, 1),
        "postgres_copy_total_s": round(copy_seconds, 1),
    }
    columns = list(rows[0])
    print_table(f"engines at {n:,} notes", columns, [[row[c] for c in columns] for row in rows])
    print_table("bulk load", list(load), [list(load.values())])
    payload = {"load": load, "engines": rows}
    payload["comparisons"] = engine_comparisons(payload)
    write_result("engines", payload)
    return payload


_MEASURES = (  # (key, what, unit, better)
    ("remember_per_s", "remember with consolidation", "notes/s", "higher"),
    ("recall_p50_ms", "recall p50", "ms", "lower"),
    ("exact_p50_ms", "exact search, selective, first page, HTTP p50", "ms", "lower"),
    ("regex_p50_ms", "regex search, selective, first page, HTTP p50", "ms", "lower"),
    ("semantic_http_p50_ms", "semantic search over HTTP p50", "ms", "lower"),
    ("serve_pss_mib", "afi serve memory (PSS) after the searches", "MiB", "lower"),
    ("bytes_per_note", "bytes on disk per note", "bytes", "lower"),
)


def engine_comparisons(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Given this benchmark's JSON, return PostgreSQL beside SQLite for each measure (a result written
    before comparisons existed can be given them with this)."""
    by_engine = {row["engine"]: row for row in payload["engines"]}
    pg, lite = by_engine["postgresql"], by_engine["sqlite"]
    n, load = payload["load"]["notes"], payload["load"]
    return comparisons(
        comparison(
            f"bulk load of {n:,} notes",
            "notes/s",
            "higher",
            ours=("PostgreSQL: afi db copy (COPY)", load["postgres_copy_notes_per_s"]),
            baseline=("SQLite: remember, one transaction", load["sqlite_remember_load_per_s"]),
        ),
        *(
            comparison(
                f"{what}, {n:,} notes", unit, better, ours=("PostgreSQL", pg[key]), baseline=("SQLite", lite[key])
            )
            for key, what, unit, better in _MEASURES
        ),
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--notes", type=int)
    parser.add_argument("--store", type=Path, help="a SQLite store of --notes notes to build once and reuse")
    args = parser.parse_args()
    run(quick=args.quick, notes=args.notes, store=args.store)
    os._exit(0)
