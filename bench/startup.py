"""How long ``afi`` takes to answer, as a user runs it: the console script, launched afresh each time.

``python -m bench.startup`` (or ``python -m bench startup [--quick]``). Each round runs, one after
the other, ``sqlite-utils --version`` (the baseline: a Python CLI from the same virtualenv), ``afi
--version``, ``afi -h``, ``afi ls /facts``, ``afi cat`` of a note, ``afi serve`` until
``/.afi/manifest.json`` answers (and, in the same launch, until ``/mcp`` answers an ``initialize``: the
MCP endpoint loads after the server listens), and ``afi mount`` until it returns mounted (when this machine has
FUSE); the figures are each command's median over the rounds (5; 3 with ``--quick``), so a busy
machine slows both sides of every ratio alike. The store is a temporary SQLite file holding one note,
opened once before the first round. The quick commands' module counts (``-X importtime``) say how
much each one loads. Goals: ``--version`` and ``-h`` ≤ 0.25 s, ``ls`` and ``cat`` ≤ 0.5 s, ``serve``
and ``mount`` ≤ 1.5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ._common import RESULTS_DIR, comparison, comparisons, print_table, write_result

__all__ = ["run"]

BIN = Path(sys.executable).parent
AFI = BIN / "afi"
BASELINE = "sqlite-utils --version"
NOTE = "/facts/startup.md"
QUICK = {"afi --version": ("--version",), "afi -h": ("-h",), "afi ls /facts": ("ls", "/facts"),
         f"afi cat {NOTE}": ("cat", NOTE)}  # fmt: skip
GOALS = {
    "afi --version": 0.25,
    "afi -h": 0.25,
    "afi ls /facts": 0.5,
    f"afi cat {NOTE}": 0.5,
    "afi serve, to the manifest": 1.5,
    "afi mount, to mounted": 1.5,
}  # fmt: skip
SERVE, SERVE_MCP = "afi serve, to the manifest", "afi serve, to an MCP initialize"
MCP_INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench.startup", "version": "1"}}}
).encode()  # fmt: skip
DEADLINE = 60.0  # seconds a server or a mount has to come up


def _env(base: Path) -> dict[str, str]:
    env = {**os.environ, "AFI_DB": str(base / "afi.db"), "AFI_ROOT": str(base / "files"), "COLUMNS": "120"}
    for name in ("AFI_SPACE", "AFI_TOKEN", "PYTHONPROFILEIMPORTTIME"):
        env.pop(name, None)
    return env


def _timed(args: Sequence[str], env: dict[str, str]) -> float:
    """Run a command to its end; return its wall time in seconds (it must succeed)."""
    started = time.perf_counter()
    done = subprocess.run(list(args), env=env, capture_output=True, timeout=DEADLINE, check=False)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return took


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _serve(env: dict[str, str]) -> dict[str, float]:
    """Launch ``afi serve``; return the seconds until ``/.afi/manifest.json`` first answers 200, and until
    ``/mcp`` then answers an ``initialize`` (a request there waits while the MCP endpoint loads)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}/.afi/manifest.json"
    started = time.perf_counter()
    proc = subprocess.Popen([str(AFI), "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)  # fmt: skip
    try:
        while time.perf_counter() - started < DEADLINE:
            if proc.poll() is not None:
                said = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"afi serve exited {proc.returncode}: {said[-2000:]}")
            try:
                with urllib.request.urlopen(url, timeout=1) as answer:
                    if answer.status == 200 and b'"afi_version"' in answer.read():
                        manifest = time.perf_counter() - started
                        break
            except OSError:  # not listening yet (refused), or not answering yet
                time.sleep(0.005)
        else:
            raise RuntimeError(f"afi serve did not answer {url} within {DEADLINE:g} s")
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/mcp", data=MCP_INITIALIZE, method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=DEADLINE) as answer:
            if answer.status != 200 or b'"serverInfo"' not in answer.read():
                raise RuntimeError(f"/mcp answered initialize with {answer.status}")
        return {SERVE: manifest, SERVE_MCP: time.perf_counter() - started}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def fuse_available() -> bool:
    """Whether this machine can mount: a /dev/fuse and fusermount3 to take the mount down."""
    return os.path.exists("/dev/fuse") and shutil.which("fusermount3") is not None


def _mount(env: dict[str, str], mountpoint: Path) -> float:
    """Run ``afi mount MOUNTPOINT`` (it returns once mounted); return its seconds, then unmount."""
    from tests.support.fuse import unmount

    mountpoint.mkdir(parents=True)
    try:
        took = _timed([str(AFI), "mount", str(mountpoint)], env)
        if not os.path.ismount(mountpoint):
            raise RuntimeError(f"afi mount returned but {mountpoint} is not mounted")
        return took
    finally:
        unmount(mountpoint)


def _modules(args: Sequence[str], env: dict[str, str]) -> int:
    """Run ``afi ARGS`` once more with ``-X importtime``; return how many modules it imported."""
    done = subprocess.run([str(AFI), *args], env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, capture_output=True,
                          text=True, timeout=DEADLINE, check=True)  # fmt: skip
    return sum(
        1 for line in done.stderr.splitlines() if line.startswith("import time:") and "imported package" not in line
    )


def _prepare(base: Path, env: dict[str, str]) -> None:
    """Create the store with one note (this first open applies the schema, outside the timed runs)."""
    (base / "files").mkdir()
    name = NOTE.rsplit("/", 1)[1].removesuffix(".md")
    _timed([str(AFI), "remember", "fact", "Startup is measured from the console script.", "--name", name], env)


def measure(rounds: int, *, mount: bool) -> dict[str, list[float]]:
    """Run every command ``rounds`` times, a round at a time; return each one's seconds."""
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="afi-bench-startup-") as tmp:
        base = Path(tmp)
        env = _env(base)
        _prepare(base, env)
        steps: dict[str, Callable[[int], float | dict[str, float]]] = {
            BASELINE: lambda _: _timed([str(BIN / "sqlite-utils"), "--version"], env),
            **{label: (lambda _, args=args: _timed([str(AFI), *args], env)) for label, args in QUICK.items()},
            SERVE: lambda _: _serve(env),
        }
        if mount:
            steps["afi mount, to mounted"] = lambda i: _mount(env, base / f"mnt{i}")
        for step in steps.values():  # once untimed: the files in the page cache, as a user's second run
            step(-1)
        for i in range(rounds):
            for label, step in steps.items():
                took = step(i)
                for name, seconds in took.items() if isinstance(took, dict) else [(label, took)]:
                    times.setdefault(name, []).append(seconds)
        times["modules"] = [float(_modules(args, env)) for args in QUICK.values()]
    return times


def run(*, quick: bool = False, rounds: int | None = None, results_dir: Path | None = None) -> dict[str, Any]:
    """Measure every command (3 rounds with ``quick``, else 5); print, write and return the figures."""
    count = rounds or (3 if quick else 5)
    mount = fuse_available()
    times = measure(count, mount=mount)
    modules = dict(zip(QUICK, (int(n) for n in times.pop("modules")), strict=True))
    base = statistics.median(times[BASELINE])
    rows = []
    for label, seconds in times.items():
        median = statistics.median(seconds)
        rows.append({"command": label, "median_s": round(median, 3), "min_s": round(min(seconds), 3),
                     "max_s": round(max(seconds), 3), "ratio_to_baseline": round(median / base, 2),
                     "goal_s": GOALS.get(label), "goal_met": None if label not in GOALS else median <= GOALS[label],
                     "modules": modules.get(label)})  # fmt: skip
    columns = ["command", "median_s", "min_s", "max_s", "ratio_to_baseline", "goal_s", "goal_met", "modules"]
    shown = [["-" if row[c] is None else row[c] for c in columns] for row in rows]
    print_table(f"afi start-up: median of {count} runs, beside {BASELINE}", columns, shown)
    pairs = [comparison(f"{row['command']}, median of {count}", "s", "lower", ours=(row["command"], row["median_s"]),
                        baseline=(BASELINE, round(base, 3)))
             for row in rows if row["command"] != BASELINE]  # fmt: skip
    payload = {
        "bench": "startup",
        "rounds": count,
        "fuse": mount,
        "commands": rows,
        "goals_met": all(row["goal_met"] for row in rows if row["goal_met"] is not None),
        "comparisons": comparisons(*pairs),
    }
    write_result("startup", payload, results_dir)
    return payload


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds instead of 5")
    parser.add_argument("--rounds", type=int, default=None, help="rounds to take the median of")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    run(quick=args.quick, rounds=args.rounds, results_dir=args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
