"""``afi sync`` throughput: a first sync of an N-note store, an incremental sync of 100 changes, a sync
with nothing new; store to store and through an ``afi serve`` door.

``python -m bench sync [--quick] [--notes=N]`` (default 100,000 notes; ``--quick`` 5,000);
``python -m bench.sync --postgres`` adds a first sync into a new PostgreSQL store (the embedded
server, durable, as ``bench engines`` starts it). The hash embedder (``AFI_EMBEDDER=hash``) on every
side, so the figures are sync's own, not a sentence model's.

- The laptop's store (SQLite) is loaded with N facts by ``remember_many`` (batches of 500,
  consolidation off): its rate is the in-run baseline, the provider writing the same notes itself.
  ``afi export`` then ``afi import`` of that store into a new one is the second baseline (the CLI's
  own copy of a space, start-up included).
- First sync: the laptop with a new SQLite file (store to store), then with a new store behind a real
  ``afi serve`` process on 127.0.0.1 (an ``afi:admin`` key), each both ways, in notes/s.
- Incremental: 100 changes on the laptop (50 new facts, 50 re-saves of existing names), then a sync
  with each; nothing new: a sync right after, the median of 5. Each timed in this process around the
  sync call (no CLI start-up), the endpoints made beforehand.

Goals: first sync over HTTP >= 5,000 notes/s; incremental 100 changes <= 1 s; nothing new
<= 100 ms.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ._common import comparison, comparisons, corpus, print_table, write_result

__all__ = ["GOAL_FIRST_NOTES_PER_S", "GOAL_INCREMENTAL_S", "GOAL_NOTHING_MS", "main", "run"]

GOAL_FIRST_NOTES_PER_S = 5_000.0
GOAL_INCREMENTAL_S = 1.0
GOAL_NOTHING_MS = 100.0
BATCH = 500
CHANGES = 100
REPEATS = 5


def _load(provider: Any, caller: Any, texts: list[str]) -> float:
    """Given an empty store's provider, remember the texts as named facts, ``BATCH`` a call; return notes/s."""
    started = time.perf_counter()
    for at in range(0, len(texts), BATCH):
        provider.remember_many(caller, [{"kind": "fact", "name": f"n{at + i}", "content": text, "consolidate": False}
                                        for i, text in enumerate(texts[at : at + BATCH])])  # fmt: skip
    return len(texts) / (time.perf_counter() - started)


def _afi(*args: str) -> None:
    done = subprocess.run([sys.executable, "-c", "from afi.cli import main; main()", *args], capture_output=True,
                          text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"afi {' '.join(args[:1])} failed: {done.stderr[-2000:]}")


def _export_import(db: Path, root: Path, work: Path) -> float:
    """Given a store, copy its spaces into a new store with ``afi export`` + ``afi import``; return seconds."""
    bundle, target = work / "bundle", work / "copy.db"
    started = time.perf_counter()
    _afi("export", "-o", str(bundle), "--db", str(db), "--root", str(root))
    _afi("import", str(bundle), "--db", str(target), "--root", str(work / "copy-files"))
    return time.perf_counter() - started


@contextmanager
def _served(db: Path, root: Path) -> Iterator[tuple[str, str]]:
    """``afi serve`` over a new store in its own process; yield its URL and an afi:admin key."""
    from afi.auth.keys import KeyStore
    from tests.support.servers import start_afi_serve

    keys = KeyStore(db)
    token = keys.create(space="default", scopes=("afi:admin",), name="bench")[1]
    keys.close()
    with start_afi_serve(db, root) as server:
        yield server.url, token


def _timed(call: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = call()
    return time.perf_counter() - started, out


def _changes(provider: Any, caller: Any, round_: int) -> None:
    """Make ``CHANGES`` changes: half new facts, half re-saves of existing names (a new version each)."""
    half = CHANGES // 2
    new = corpus(half, seed=100 + round_, prefix="new ")
    provider.remember_many(caller, [{"kind": "fact", "content": text, "consolidate": False} for text in new])
    resaved = corpus(half, seed=200 + round_, prefix="resaved ")
    provider.remember_many(caller, [{"kind": "fact", "name": f"n{round_ * half + i}", "content": text,
                                     "consolidate": False} for i, text in enumerate(resaved)])  # fmt: skip


def _first_into_postgres(here: Any, notes: int, work: Path) -> float:
    """Given the laptop's endpoint, push its space into a new PostgreSQL store; return seconds."""
    from afi.auth.keys import LOCAL_OWNER
    from afi.providers.memory.provider import MemoryProvider
    from afi.providers.memory.sync import LocalEndpoint, sync
    from tests.support.postgres import Databases, postgres_server

    from .engines import SERVER_SETTINGS

    with postgres_server(settings=SERVER_SETTINGS) as server_url:
        databases = Databases(server_url)
        try:
            provider = MemoryProvider(databases.fresh(), work / "pg-files")
            seconds, report = _timed(lambda: sync(here, LocalEndpoint(provider, LOCAL_OWNER, "pg"), pull=False))
            assert report.pushed.inserted == notes, report.pushed
        finally:
            databases.close()
    return seconds


def measure(notes: int, work: Path, *, postgres: bool = False) -> dict[str, Any]:
    """Given a note count and a folder, load a store, sync it both ways (store to store and over HTTP),
    then 100 changes, then nothing; return the figures (``postgres``: and a first push into PostgreSQL)."""
    from afi.app.sync import _HttpEndpoint
    from afi.auth.keys import LOCAL_OWNER
    from afi.clients.http import HttpClient
    from afi.providers.memory.provider import MemoryProvider
    from afi.providers.memory.sync import LocalEndpoint, sync

    laptop_db, laptop_root = work / "laptop.db", work / "laptop-files"
    laptop = MemoryProvider(laptop_db, laptop_root)
    load_rate = _load(laptop, LOCAL_OWNER, corpus(notes, seed=1))
    export_import_s = _export_import(laptop_db, laptop_root, work)
    here = LocalEndpoint(laptop, LOCAL_OWNER, "laptop")
    other = LocalEndpoint(MemoryProvider(work / "other.db", work / "other-files"), LOCAL_OWNER, "other")
    first_local_s, report = _timed(lambda: sync(here, other))
    assert report.pushed.inserted == notes, report.pushed
    figures: dict[str, Any] = {"notes": notes, "load_notes_per_s": load_rate, "export_import_s": export_import_s,
                               "first_local_s": first_local_s}  # fmt: skip
    if postgres:
        figures["first_postgres_s"] = _first_into_postgres(here, notes, work)
    with _served(work / "server.db", work / "server-files") as (url, token), \
            HttpClient(url, token, space="default", timeout=300) as client:  # fmt: skip
        there = _HttpEndpoint(client, "laptop")
        first_http_s, report = _timed(lambda: sync(here, there))
        assert report.pushed.inserted == notes, report.pushed
        figures["first_http_s"] = first_http_s
        for side, remote in (("local", other), ("http", there)):
            rounds = []
            for round_ in range(3):
                _changes(laptop, LOCAL_OWNER, round_ + (10 if side == "http" else 0))
                seconds, report = _timed(lambda remote=remote: sync(here, remote))
                assert report.pushed.notes >= CHANGES, report.pushed
                rounds.append(seconds)
            figures[f"incremental_{side}_s"] = statistics.median(rounds)
            figures[f"nothing_{side}_ms"] = 1000 * statistics.median(
                _timed(lambda remote=remote: sync(here, remote))[0] for _ in range(REPEATS)
            )
    return figures


def run(*, quick: bool = False, notes: int | None = None, postgres: bool = False) -> dict[str, Any]:
    """Run the benchmark (``quick``: 5,000 notes; ``postgres``: a push into PostgreSQL too), print the
    table, write the JSON; return it."""
    os.environ["AFI_EMBEDDER"] = "hash"
    n = notes or (5_000 if quick else 100_000)
    work = Path(tempfile.mkdtemp(prefix="afi-bench-sync-"))
    try:
        f = measure(n, work, postgres=postgres)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    first_http = n / f["first_http_s"]
    first_local = n / f["first_local_s"]
    export_import = n / f["export_import_s"]
    result = {
        "embedder": "hash",
        "notes": n,
        "first_sync_http_notes_per_s": round(first_http, 1),
        "first_sync_store_notes_per_s": round(first_local, 1),
        "baseline_remember_many_notes_per_s": round(f["load_notes_per_s"], 1),
        "baseline_export_import_notes_per_s": round(export_import, 1),
        "incremental_100_http_s": round(f["incremental_http_s"], 3),
        "incremental_100_store_s": round(f["incremental_local_s"], 3),
        "nothing_new_http_ms": round(f["nothing_http_ms"], 1),
        "nothing_new_store_ms": round(f["nothing_local_ms"], 1),
        **({"first_sync_postgres_notes_per_s": round(n / f["first_postgres_s"], 1)} if postgres else {}),
        "meets_goal": {
            "first_sync_http": first_http >= GOAL_FIRST_NOTES_PER_S,
            "incremental_100": f["incremental_http_s"] <= GOAL_INCREMENTAL_S,
            "nothing_new": f["nothing_http_ms"] <= GOAL_NOTHING_MS,
        },
        "comparisons": comparisons(
            comparison(
                "first sync over HTTP",
                "notes/s",
                "higher",
                ours=("afi sync", first_http),
                baseline=("remember_many", f["load_notes_per_s"]),
            ),
            comparison(
                "first sync store to store",
                "notes/s",
                "higher",
                ours=("afi sync", first_local),
                baseline=("afi export + import", export_import),
            ),
        ),
    }
    print_table(
        f"afi sync of {n:,} notes (hash embedder); goals: first >= {GOAL_FIRST_NOTES_PER_S:,.0f} notes/s over HTTP, "
        f"100 changes <= {GOAL_INCREMENTAL_S:.0f} s, nothing new <= {GOAL_NOTHING_MS:.0f} ms",
        ["measure", "store to store", "over HTTP", "baseline"],
        [
            ("first sync, notes/s", first_local, first_http,
             f"remember_many {f['load_notes_per_s']:,.0f}; export+import {export_import:,.0f}"),
            ("100 changes, s", f["incremental_local_s"], f["incremental_http_s"], "-"),
            ("nothing new, ms", f["nothing_local_ms"], f["nothing_http_ms"], "-"),
            *([("first sync into PostgreSQL, notes/s", n / f["first_postgres_s"], "-", "-")] if postgres else []),
        ],
    )  # fmt: skip
    write_result("sync", result)
    return result


def main(argv: list[str]) -> int:
    """Given command-line arguments (``--quick``, ``--notes=N``, ``--postgres``), run the benchmark; return
    the exit code."""
    notes = [int(a.removeprefix("--notes=")) for a in argv if a.startswith("--notes=")]
    run(quick="--quick" in argv, notes=notes[-1] if notes else None, postgres="--postgres" in argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
