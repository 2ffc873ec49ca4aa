"""Hostile requests: the server CPU each one costs a real ``afi serve``, beside a plain request's.

``python -m bench.hostile_cpu [--quick]`` (or ``python -m bench hostile_cpu [--quick]``). A keyless
``afi serve`` on a temporary store is sent every hostile family of the attack suites, one request at
a time (``bench/_hostile_families.py``): the HTTP corpus as raw bytes, paths that are not UTF-8, loose
Origins and Hosts, OAuth tokens used outside their resource (on a second server, with keys), Markdown
render bombs through ``/ui/browse``, front-matter bombs written to ``/facts``, 1-byte writes at
offset 1e9, a 300 MB sparse file searched page by page, a folder of 100,000 files put on disk
(``--quick``: 30 MB, 5,000 files, the ``context`` and body bombs a tenth, 50 of each plain request).
Each request's status is kept and the server process's CPU (utime + stime in ``/proc/<pid>/stat``) read
before and after it.

The baseline, in the same run: 200 ``GET /afi/stat?path=/`` and 200 writes of 4 KiB. The kernel
counts CPU in 10 ms ticks, so a request under a tick reads 0 or 10 ms: the baseline's p50 is kept,
and its mean (the CPU of all 200 over 200) is the figure compared. Goals: in every family, 0
answers 5xx and 0 requests over 1 s of server CPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ._common import RESULTS_DIR, comparison, comparisons, percentile, print_table, write_result
from ._hostile_families import FAMILIES, Meter, Sent, Target

__all__ = ["run"]

GOAL_CPU_MS = 1000.0
PLAIN = 200
QUICK_PLAIN = 50
BASELINE_STAT, BASELINE_WRITE = "GET /afi/stat?path=/", "PUT /afi/write of 4 KiB"


def _summary(sent: Sequence[Sent]) -> dict[str, Any]:
    """Given a family's requests, return its figures: counts, CPU percentiles, the heaviest inputs."""
    cpus = [s.cpu_ms for s in sent]
    heaviest = sorted(sent, key=lambda s: -s.cpu_ms)[:5]
    return {
        "requests": len(sent),
        "5xx": sum(s.status >= 500 for s in sent),
        "no_answer": sum(s.status == 0 for s in sent),
        "over_1s_cpu": sum(c > GOAL_CPU_MS for c in cpus),
        "cpu_ms": {"max": max(cpus), "p99": percentile(cpus, 99), "p50": percentile(cpus, 50),
                   "mean": round(sum(cpus) / len(cpus), 2), "total": round(sum(cpus), 1)},
        "wall_ms_max": max(s.wall_ms for s in sent),
        "statuses": {str(code): n for code, n in sorted(Counter(s.status for s in sent).items())},
        "heaviest": [{"input": s.input, "method": s.method, "status": s.status, "cpu_ms": s.cpu_ms,
                      "wall_ms": s.wall_ms} for s in heaviest],
    }  # fmt: skip


def _baseline(meter: Meter, plain: int) -> dict[str, dict[str, Any]]:
    """A plain stat and a 4 KiB write, ``plain`` of each through the kept-alive client."""
    for i in range(plain):
        meter.request(BASELINE_STAT, str(i), "GET", "/afi/stat", params={"path": "/"})
    data = os.urandom(2048).hex().encode()
    for i in range(plain):
        path = f"/files/plain/w{i}.txt"
        meter.request(BASELINE_WRITE, str(i), "PUT", "/afi/write", params={"path": path}, content=data)
    return {name: _summary([s for s in meter.log if s.family == name]) for name in (BASELINE_STAT, BASELINE_WRITE)}


def measure(quick: bool) -> dict[str, Any]:
    """Run the baseline, then every family, against a fresh server; return the figures."""
    from tests.support.servers import start_afi_serve

    log: list[Sent] = []
    with tempfile.TemporaryDirectory(prefix="afi-bench-hostile-") as tmp:
        base = Path(tmp)
        with start_afi_serve(base / "afi.db", base / "files") as server:
            meter = Meter(server, [])
            try:
                baseline = _baseline(meter, QUICK_PLAIN if quick else PLAIN)
                target = Target(server, Meter(server, log), base, quick, log)
                for _, family in FAMILIES:
                    family(target)
                target.meter.close()
            finally:
                meter.close()
            alive = server.process is not None and server.process.poll() is None
    families = {name: _summary([s for s in log if s.family == name]) for name, _ in FAMILIES}
    problems = [s for s in log if s.status >= 500 or s.status == 0 or s.cpu_ms > GOAL_CPU_MS]
    worst = max(log, key=lambda s: s.cpu_ms)
    writes = [s for s in log if s.method == "PUT"]
    return {
        "families": families,
        "baseline": baseline,
        "server_alive_at_the_end": alive,
        "clock_tick_ms": 1000 / os.sysconf("SC_CLK_TCK"),
        "worst": asdict(worst),
        "worst_write": asdict(max(writes, key=lambda s: s.cpu_ms)),
        "problems": [asdict(s) for s in problems[:200]],
    }  # fmt: skip


_COLUMNS = ["family", "requests", "5xx", "no answer", "over 1 s", "max CPU ms", "p99 ms", "p50 ms", "heaviest input"]


def _row(name: str, figures: dict[str, Any]) -> list[Any]:
    cpu = figures["cpu_ms"]
    top = figures["heaviest"][0]
    return [name, figures["requests"], figures["5xx"], figures["no_answer"], figures["over_1s_cpu"], cpu["max"],
            cpu["p99"], cpu["p50"], f"{top['input'][:60]} ({top['status']})"]  # fmt: skip


def run(*, quick: bool = False, results_dir: Path | None = None) -> dict[str, Any]:
    """Measure every family (smaller with ``quick``); print, write and return the figures."""
    found = measure(quick)
    families, baseline = found["families"], found["baseline"]
    rows = [_row(name, figures) for name, figures in families.items()]
    for name, figures in baseline.items():
        rows.append([*_row(f"baseline: {name}", figures)[:-1], f"mean {figures['cpu_ms']['mean']:.2f} ms"])
    print_table("Hostile requests: server CPU per request", _COLUMNS, rows)
    worst, worst_write = found["worst"], found["worst_write"]
    stat_mean, write_mean = (baseline[name]["cpu_ms"]["mean"] for name in (BASELINE_STAT, BASELINE_WRITE))
    pairs = [
        comparison("worst hostile request, server CPU, beside the goal", "ms", "lower",
                   ours=("worst hostile request", worst["cpu_ms"]), baseline=("goal: 1 s of CPU", GOAL_CPU_MS)),
        comparison("worst hostile request, server CPU, beside a plain stat", "ms", "lower",
                   ours=("worst hostile request", worst["cpu_ms"]), baseline=(f"{BASELINE_STAT}, mean", stat_mean)),
        comparison("worst hostile write, server CPU, beside a plain write", "ms", "lower",
                   ours=("worst hostile PUT", worst_write["cpu_ms"]),
                   baseline=(f"{BASELINE_WRITE}, mean", write_mean)),
    ]  # fmt: skip
    goals = {
        "every_family_no_5xx": all(f["5xx"] == 0 for f in families.values()),
        "every_family_none_over_1s_cpu": all(f["over_1s_cpu"] == 0 for f in families.values()),
    }
    totals = {key: sum(f[key] for f in families.values()) for key in ("requests", "5xx", "no_answer", "over_1s_cpu")}
    payload = {"bench": "hostile_cpu", "quick": quick, **found, "totals": totals,
               "goals": {"5xx_per_family": 0, "over_1s_cpu_per_family": 0, "cpu_ms_per_request": GOAL_CPU_MS},
               "goals_met": goals, "comparisons": comparisons(*pairs)}  # fmt: skip
    write_result("hostile_cpu", payload, results_dir)
    return payload


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile_cpu", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="30 MB, 5,000 files and 50 plain requests, not 300 MB, 100,000 and 200"
    )
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    run(quick=args.quick, results_dir=args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
