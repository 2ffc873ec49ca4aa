"""Mixed load over HTTP (issue 11, "safe to share"): 8 keep-alive clients against a real ``afi serve``.

``python -m bench.load [--notes 10000] [--seconds 60] [--clients 8] [--workers 2] [--writers 1]`` (or
``python -m bench load``). A store of N notes is built once through the fabric's fast path (facts and
procedures in one transaction, ``consolidate=False``) plus workspace files written through the
provider (a tenth of N), then copied once per server configuration, so every side serves the same
bytes. Each configuration is a real ``afi serve`` subprocess on 127.0.0.1 (``--port 0``): the
baseline is one process (today's configuration), beside ``afi serve --workers N`` when the CLI has
that option (found in ``afi serve --help``). Each configuration has its floor, run just before it: a
bare Starlette app answering one fixed JSON body (``bench/_load_floor.py``), served as ``afi serve`` is
(same uvicorn configuration, same workers) and sent the same requests by the same clients, so that
what the machine, uvicorn and this load generator cost is measured in the same run.

Every client is one keep-alive connection (httpx, one asyncio loop in this process for all of them)
issuing one request at a time, drawn from a fixed mix: reads, stats, lists, exact, regex and
semantic searches (first page of 20). The queries come from pools of hundreds, built from the
corpus's words, so that no per-query cache serves most of them. Two phases per configuration,
interleaved between the configurations so that a change in the machine's load hits both: ``read``
(the clients alone) and ``write`` (the same, plus one writer incrementing counters, half workspace
files, half fact notes, by read + ``If-Match`` write; a 409 is retried, not an error). After the
write phase every counter is read back: a lost write is an acknowledged increment the final value
does not hold.

Reported per configuration and phase: req/s, p50/p95/p99 overall and per kind, errors (any answer
but 200, or a transport error), lost writes, the CPU the server (also per request) and this generator
used, the 1-minute load average (the machine is shared), and the server's memory and open
descriptors (``/proc``, summed over the server process and its children) when idle, midway through
each phase (with how many of the clients' connections each process holds) and after it. Memory three
ways: RSS (which counts the store's memory-mapped pages once per connection that touched them), PSS
(shared pages divided among their mappings: what the processes really hold) and heap (anonymous
resident memory).
Goals, as ratios to the floor so they hold on any machine: req/s >= 0.25x the floor's, p99 <= 8x and
semantic p50 <= 6x the floor's, 0 errors, 0 lost writes (``GOALS_BASIS`` says where the ratios come
from). Issue 11's absolute goals (500 req/s, p99 100 ms, semantic p50 50 ms) are reported beside them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._common import RESULTS_DIR, comparison, comparisons, console, print_table, write_result
from ._load_proc import Server, server_resources, workers_supported
from ._load_store import SEED, Workload, build_store, checkpoint
from ._load_traffic import MIX, SEARCH_LIMIT, run_phase, warm

__all__ = ["MIX", "Workload", "build_store", "measure", "run", "server_resources"]

# Goals as ratios to the floor measured in the same run, so they hold on any machine: req/s a fraction
# of the floor's at least, p99 and semantic p50 a multiple of the floor's at most (see GOALS_BASIS).
GOALS = {"req_per_s_vs_floor": 0.25, "p99_vs_floor": 8.0, "semantic_p50_vs_floor": 6.0, "errors": 0, "lost_writes": 0}
GOALS_BASIS = (
    "what the code that met issue 11's absolute goals on a quiet machine (575 req/s, p99 58 ms, semantic "
    "p50 23 ms with --workers 2, commit 537dfe6) reached beside the floor on a busy one, in the same runs: "
    "0.28-0.50 of its req/s, 2.3-6.6x its p99, 3.1-5.4x its semantic p50 (load average 14-15 on 2 cores)"
)
# The absolute goals of issue 11, met on a quiet 2-core machine: reported, not the goals (they hold
# only where nothing else wants the cores).
ABSOLUTE_GOALS = {"req_per_s": 500.0, "p99_ms": 100.0, "semantic_p50_ms": 50.0}


def _goals(phase: dict[str, Any], floor: dict[str, Any]) -> dict[str, bool]:
    return {
        "req_per_s_vs_floor": phase["req_per_s"] >= GOALS["req_per_s_vs_floor"] * floor["req_per_s"],
        "p99_vs_floor": phase["latency_ms"]["p99"] <= GOALS["p99_vs_floor"] * floor["latency_ms"]["p99"],
        "semantic_p50_vs_floor": phase["semantic_p50_ms"] <= GOALS["semantic_p50_vs_floor"] * floor["semantic_p50_ms"],
        "errors": phase["errors"] == 0,
        "lost_writes": phase["lost_writes"] == 0,
    }


def _absolute_goals(phase: dict[str, Any]) -> dict[str, bool]:
    return {
        "req_per_s": phase["req_per_s"] >= ABSOLUTE_GOALS["req_per_s"],
        "p99_ms": phase["latency_ms"]["p99"] <= ABSOLUTE_GOALS["p99_ms"],
        "semantic_p50_ms": phase["semantic_p50_ms"] <= ABSOLUTE_GOALS["semantic_p50_ms"],
    }


def measure(
    notes: int,
    *,
    seconds: float,
    clients: int,
    workers: int | None,
    writers: int,
    warmup: float,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Build the store, serve it one way per configuration beside that configuration's floor, run the
    floor's phase and both of afi serve's; return the figures."""
    configs: list[tuple[str, list[str]]] = [("1 process", [])]
    if workers:
        configs.append((f"--workers {workers}", ["--workers", str(workers)]))
    with tempfile.TemporaryDirectory(prefix="afi-bench-load-", dir=workdir) as tmp:
        base = Path(tmp)
        started = time.perf_counter()
        work = build_store(base / "template" / "afi.db", base / "template" / "root", notes)
        built = time.perf_counter() - started
        checkpoint(base / "template" / "afi.db")
        db_bytes = sum(p.stat().st_size for p in (base / "template").glob("afi.db*"))
        servers: list[Server] = []
        floors: list[Server] = []
        results: dict[str, dict[str, Any]] = {}
        try:
            for i, (name, extra) in enumerate(configs):
                home = base / f"config{i}"
                shutil.copytree(base / "template", home)
                server = Server.start(name, home / "afi.db", home / "root", extra)
                servers.append(server)
                floors.append(Server.floor(name, extra))
                results[name] = {"argv_extra": extra, "resources": {"idle": server_resources(server.proc.pid)}}
            # interleaved, each floor just before its server: a change in the machine's load hits every side
            runs = [("floor", 0, floor) for floor in floors]
            runs = [run for pair in zip(runs, [("read", 0, s) for s in servers], strict=True) for run in pair]
            runs += [("write", writers, server) for server in servers]
            for phase, phase_writers, server in runs:
                figures = _run(server, work, phase_writers, clients=clients, seconds=seconds, warmup=warmup)
                resources = figures.pop("resources_midway"), figures.pop("resources_after")
                if phase == "floor":
                    figures["resources"] = {"during": resources[0], "after": resources[1]}
                    results[server.name]["floor"] = figures
                else:
                    results[server.name].setdefault("phases", {})[phase] = figures
                    kept = results[server.name]["resources"]
                    kept[f"during_{phase}"], kept[f"after_{phase}"] = resources
                _say(f"{server.name} {phase if phase != 'floor' else 'floor (bare Starlette)'}", figures)
        finally:
            for server in servers + floors:
                server.stop()
    for config in results.values():
        config["vs_floor"] = _vs_floor(config)
        for figures in config["phases"].values():
            figures["goals_met"] = _goals(figures, config["floor"])
            figures["absolute_goals_met"] = _absolute_goals(figures)
    return {"notes": notes, "db_bytes": db_bytes, "build_seconds": built, "configs": results}


def _run(
    server: Server, work: Workload, writers: int, *, clients: int, seconds: float, warmup: float
) -> dict[str, Any]:
    """Warm the server up, then run one timed phase; return its figures with the machine's load around it."""
    warm(server, work, clients=clients, seconds=warmup, seed=SEED + 7)
    load_before = os.getloadavg()[0]
    figures = run_phase(server, work, clients=clients, writers=writers, seconds=seconds, seed=SEED)
    figures["loadavg_1min_before"] = load_before
    figures["loadavg_1min_after"] = os.getloadavg()[0]
    return figures


def _say(what: str, figures: dict[str, Any]) -> None:
    console.print(
        f"{what}: {figures['req_per_s']:.0f} req/s, p99 {figures['latency_ms']['p99']:.0f} ms, semantic p50 "
        f"{figures['semantic_p50_ms']:.0f} ms, errors {figures['errors']}, lost writes {figures['lost_writes']} "
        f"(generator CPU {figures['generator_cpu_percent']:.0f}%, load {figures['loadavg_1min_after']:.2f})"
    )


def _vs_floor(config: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Given one configuration's figures, return each phase's figures as ratios to its floor's: req/s
    as a fraction of the floor's, latencies as multiples of the floor's (same requests, same clients)."""
    floor = config["floor"]
    return {
        phase: {
            "req_per_s": figures["req_per_s"] / floor["req_per_s"],
            "p99_ms": figures["latency_ms"]["p99"] / floor["latency_ms"]["p99"],
            "semantic_p50_ms": figures["semantic_p50_ms"] / floor["semantic_p50_ms"],
            "server_cpu_per_request": figures["server_cpu_ms_per_request"] / floor["server_cpu_ms_per_request"],
        }
        for phase, figures in config["phases"].items()
    }


def _comparisons(configs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Given each configuration's figures, return each configuration beside its floor, then ``--workers
    N`` beside one process (when it ran)."""
    pairs = []
    for name, config in configs.items():
        mine, floor = config["phases"]["read"], config["floor"]
        for metric, unit, better, (ours_value, floor_value) in (
            ("throughput", "req/s", "higher", (mine["req_per_s"], floor["req_per_s"])),
            ("p99 latency", "ms", "lower", (mine["latency_ms"]["p99"], floor["latency_ms"]["p99"])),
            ("semantic search p50", "ms", "lower", (mine["semantic_p50_ms"], floor["semantic_p50_ms"])),
        ):
            pairs.append(
                comparison(
                    f"{metric}, readers only, {name}: beside the floor",
                    unit,
                    better,
                    ours=(f"afi serve, {name}", ours_value),
                    baseline=(f"the floor (bare Starlette), {name}", floor_value),
                )
            )
    ours_name = next((name for name in configs if name != "1 process"), None)
    if ours_name is None or "1 process" not in configs:
        return comparisons(*pairs)
    ours, base = configs[ours_name], configs["1 process"]
    for phase, what in (("read", "readers only"), ("write", "readers and one If-Match writer")):
        mine, theirs = ours["phases"][phase], base["phases"][phase]
        for metric, unit, better, (ours_value, base_value) in (
            ("throughput", "req/s", "higher", (mine["req_per_s"], theirs["req_per_s"])),
            ("p99 latency", "ms", "lower", (mine["latency_ms"]["p99"], theirs["latency_ms"]["p99"])),
            ("semantic search p50", "ms", "lower", (mine["semantic_p50_ms"], theirs["semantic_p50_ms"])),
        ):
            pairs.append(
                comparison(
                    f"{metric}, {what}",
                    unit,
                    better,
                    ours=(f"afi serve {ours_name}", ours_value),
                    baseline=("afi serve, 1 process", base_value),
                )
            )
    pairs.append(
        comparison(
            "memory (PSS) after the write phase",
            "MB",
            "lower",
            ours=(f"afi serve {ours_name}", ours["resources"]["after_write"]["pss_mb"]),
            baseline=("afi serve, 1 process", base["resources"]["after_write"]["pss_mb"]),
        )
    )
    return comparisons(*pairs)


def _print(figures: dict[str, Any]) -> None:
    rows, kinds_rows, resource_rows = [], [], []
    for name, config in figures["configs"].items():
        for phase, f in {"floor": config["floor"], **config["phases"]}.items():
            lat = f["latency_ms"]
            rows.append((
                f"{name} / {phase}", f["req_per_s"], lat["p50"], lat["p95"], lat["p99"], f["semantic_p50_ms"],
                f["errors"], f"{f['lost_writes']}" + (f" of {f['writes_acked']}" if f["writers"] else ""),
                f"{f['server_cpu_percent']:.0f}%", f"{f['server_cpu_ms_per_request']:.2f}",
                f"{f['generator_cpu_percent']:.0f}%",
                f"{f['loadavg_1min_before']:.2f}",
            ))  # fmt: skip
            for kind, s in f["by_kind"].items():
                kinds_rows.append((f"{name} / {phase} / {kind}", s["count"], s["p50"], s["p95"], s["p99"], s["max"]))
        for moment, r in config["resources"].items():
            spread = r.get("connections_by_process")
            shown = "" if spread is None else " + ".join(map(str, spread)) or "0"
            resource_rows.append(
                (f"{name} / {moment}", r["processes"], r["rss_mb"], r["pss_mb"], r["anon_mb"], r["fds"], shown)
            )
    title = f"load: {figures['notes']:,} notes, {figures['clients']} clients, {figures['seconds']:.0f} s a phase"
    columns: Sequence[str] = ("server / phase", "req/s", "p50 ms", "p95 ms", "p99 ms", "semantic p50", "errors",
                              "lost writes", "server CPU", "ms CPU/req", "generator CPU", "load")  # fmt: skip
    print_table(title, columns, rows)
    columns = ("server / phase / kind", "n", "p50 ms", "p95 ms", "p99 ms", "max ms")
    print_table("load: latency by kind", columns, kinds_rows)
    columns = ("server / moment", "processes", "RSS MB", "PSS MB", "heap MB", "descriptors", "connections by process")
    print_table("load: server resources (summed over the server's processes)", columns, resource_rows)
    ratio_rows = [
        (
            f"{name} / {phase}",
            f"{r['req_per_s']:.2f}",
            f"{r['p99_ms']:.1f}",
            f"{r['semantic_p50_ms']:.1f}",
            f"{r['server_cpu_per_request']:.1f}",
        )
        for name, config in figures["configs"].items()
        for phase, r in config["vs_floor"].items()
    ]
    goals = figures["goals"]
    columns = (
        "server / phase",
        f"req/s ÷ floor (goal ≥ {goals['req_per_s_vs_floor']})",
        f"p99 ÷ floor (≤ {goals['p99_vs_floor']})",
        f"semantic p50 ÷ floor (≤ {goals['semantic_p50_vs_floor']})",
        "server CPU a request ÷ floor",
    )
    print_table("load: afi serve beside the floor (a bare Starlette app, same uvicorn, workers and clients)",
                columns, ratio_rows)  # fmt: skip


def run(
    quick: bool = False,
    *,
    notes: int | None = None,
    seconds: float | None = None,
    clients: int = 8,
    workers: int | None = None,
    writers: int = 1,
    warmup: float | None = None,
    results_dir: Path | None = None,
) -> dict[str, Any]:
    """Run the load bench; print the tables, write ``load.json``; return the figures.

    ``workers``: the N of ``afi serve --workers N`` (default: the CPU count; 0 measures only one
    process). Without the option in ``afi serve --help`` only the one-process side runs.
    """
    notes = notes or (2000 if quick else 10_000)
    seconds = seconds or (10.0 if quick else 60.0)
    warmup = min(5.0, seconds / 4) if warmup is None else warmup
    wanted = (os.cpu_count() or 2) if workers is None else workers
    supported = workers_supported()
    figures = measure(
        notes,
        seconds=seconds,
        clients=clients,
        workers=wanted if wanted and supported else None,
        writers=writers,
        warmup=warmup,
    )
    payload = {
        "bench": "load",
        "seed": SEED,
        "quick": quick,
        "seconds": seconds,
        "warmup_seconds": warmup,
        "clients": clients,
        "writers": writers,
        "mix": MIX,
        "search_limit": SEARCH_LIMIT,
        "goals": GOALS,
        "goals_basis": GOALS_BASIS,
        "absolute_goals": ABSOLUTE_GOALS,
        "workers_requested": wanted,
        "workers_option_available": supported,
        "cpus": os.cpu_count(),
        **figures,
    }
    payload["comparisons"] = _comparisons(figures["configs"])
    _print(payload)
    if wanted and not supported:
        console.print("afi serve has no --workers option yet: only the one-process side was measured")
    path = write_result("load", payload, results_dir)
    console.print(f"wrote {path}")
    return payload


def _positive(kind: type[float] | type[int]) -> Any:
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError("must be positive")
        return value

    return parse


def main(argv: Sequence[str] | None = None) -> int:
    """Given command-line arguments, run the bench; return the exit code."""
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=_positive(int), default=None, help="notes in the store (default 10000)")
    parser.add_argument("--seconds", type=_positive(float), default=None, help="seconds per phase (default 60)")
    parser.add_argument("--clients", type=_positive(int), default=8, help="keep-alive clients (default 8)")
    parser.add_argument("--workers", type=int, default=None, help="N of afi serve --workers N (0: one process only)")
    parser.add_argument("--writers", type=int, default=1, help="writers in the write phase (default 1)")
    parser.add_argument("--warmup", type=float, default=None, help="untimed seconds before each phase")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    run(
        args.quick,
        notes=args.notes,
        seconds=args.seconds,
        clients=args.clients,
        workers=args.workers,
        writers=args.writers,
        warmup=args.warmup,
        results_dir=args.results_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
