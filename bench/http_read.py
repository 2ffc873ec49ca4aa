"""HTTP read throughput: ``GET /afi/read?path=/files/...`` vs Starlette ``StaticFiles`` over the same files.

``python -m bench.http_read [--files 1000] [--rounds 5] [--concurrency 8]`` (or ``python -m bench
http_read``). Small files (1-4 KiB) are written through the provider into ``/files``; one real
uvicorn server, in its own process on 127.0.0.1 and a free port, serves an app mounting both the AFI
HTTP binding and ``StaticFiles`` at ``/static`` over the files on disk. An httpx client reads every
file through each route, warm-up round first, then rounds alternating between the two, checking every
body against the bytes written. Goal: AFI reads at least 0.5x the files/s of StaticFiles.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from afi.provider import Caller

from ._common import RESULTS_DIR, comparison, comparisons, console, corpus, print_table, write_result

__all__ = ["GOAL_RATIO", "build_app", "read_round", "run", "serve", "write_files"]

SEED = 20240612
SPACE = "default"
GOAL_RATIO = 0.5
REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT = 30.0


def write_files(provider: Any, caller: Caller, n: int, *, seed: int = SEED) -> dict[str, bytes]:
    """Given a provider, write n text files of 1-4 KiB through it into ``/files``; return rel path -> bytes."""
    rng = random.Random(seed)
    lines = corpus(max(64, n * 4), seed=seed)
    written: dict[str, bytes] = {}
    for i in range(n):
        size = rng.randint(1024, 4096)
        text = ""
        while len(text) < size:
            text += rng.choice(lines) + "\n"
        data = text[:size].encode()
        rel = f"d{i % 10}/f{i:04d}.txt"
        provider.write(caller, f"/files/{rel}", data)
        written[rel] = data
    return written


def build_app(provider: Any, static_dir: Path) -> Any:
    """Given a provider and the directory its files live in, return the AFI app with StaticFiles at /static."""
    from starlette.staticfiles import StaticFiles

    from afi.bindings.http import create_app

    app = create_app(provider)
    app.mount("/static", StaticFiles(directory=static_dir), name="static")
    return app


def serve(db: Path, root: Path) -> None:
    """Serve the bench app on 127.0.0.1, a free port, printed as ``PORT <n>``; return on SIGTERM."""
    import uvicorn

    from afi.providers.memory.provider import MemoryProvider

    provider = MemoryProvider(db, root)
    app = build_app(provider, root / SPACE)
    # proto IPPROTO_TCP: asyncio sets TCP_NODELAY only on such sockets (proto 0 costs ~40 ms per response)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    server.run(sockets=[sock])


class _Server:
    """The bench server in a child process, started and stopped by this context manager."""

    def __init__(self, db: Path, root: Path, log: Path) -> None:
        self.db, self.root, self.log = db, root, log
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> _Server:
        argv = [sys.executable, "-m", "bench.http_read", "--serve", "--db", str(self.db), "--root", str(self.root)]
        with self.log.open("w") as err:
            self.proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("PORT "):
            self.__exit__()
            raise RuntimeError(f"the bench server did not start: {self.log.read_text()[-2000:]}")
        self.url = f"http://127.0.0.1:{line.split()[1]}"
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                if httpx.get(f"{self.url}/.afi/manifest.json", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.__exit__()
                raise RuntimeError(f"the bench server did not answer: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)

    def cpu_seconds(self) -> float:
        """The server process's CPU time so far (user + system), from /proc."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()


def _url(side: str, rel: str) -> str:
    if side == "afi":
        return "/afi/read?path=" + quote(f"/files/{rel}", safe="/")
    return "/static/" + quote(rel)


async def read_round(base_url: str, side: str, files: dict[str, bytes], concurrency: int) -> tuple[float, int]:
    """Read every file once through ``side`` (``afi`` or ``static``); return (seconds, bodies that differed).

    Raises:
        RuntimeError: a read did not answer 200.
    """
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=30) as client:

        async def one(rel: str) -> bool:
            async with gate:
                response = await client.get(_url(side, rel))
            if response.status_code != 200:
                raise RuntimeError(f"{side} {rel}: HTTP {response.status_code} {response.text[:200]}")
            return response.content == files[rel]

        start = time.perf_counter()
        same = await asyncio.gather(*(one(rel) for rel in files))
        elapsed = time.perf_counter() - start
    return elapsed, same.count(False)


def measure(n: int, *, rounds: int, concurrency: int, workdir: Path | None = None) -> dict[str, Any]:
    """Given a file count, write the files, serve them, time the rounds; return the figures."""
    from afi.providers.memory.provider import MemoryProvider

    with tempfile.TemporaryDirectory(prefix="afi-bench-http-", dir=workdir) as tmp:
        base = Path(tmp)
        db, root = base / "afi.db", base / "root"
        provider = MemoryProvider(db, root)
        start = time.perf_counter()
        files = write_files(provider, Caller(principal="local", space=SPACE), n)
        wrote = time.perf_counter() - start
        del provider
        rates: dict[str, list[float]] = {"afi": [], "static": []}
        cpu: dict[str, float] = {"afi": 0.0, "static": 0.0}
        mismatches = 0
        with _Server(db, root, base / "server.log") as server:
            for side in rates:  # warm-up: connections, page cache, SQLite cache
                mismatches += asyncio.run(read_round(server.url, side, files, concurrency))[1]
            for r in range(rounds):
                for side in ("afi", "static") if r % 2 == 0 else ("static", "afi"):
                    before = server.cpu_seconds()
                    seconds, bad = asyncio.run(read_round(server.url, side, files, concurrency))
                    cpu[side] += server.cpu_seconds() - before
                    rates[side].append(n / seconds)
                    mismatches += bad
    afi, static = statistics.median(rates["afi"]), statistics.median(rates["static"])
    cpu_us = {side: used * 1e6 / (n * rounds) for side, used in cpu.items()}
    return {
        "files": n,
        "bytes_total": sum(len(b) for b in files.values()),
        "write_seconds": wrote,
        "concurrency": concurrency,
        "rounds": rounds,
        "afi_files_per_s": {"median": afi, "min": min(rates["afi"]), "max": max(rates["afi"]), "all": rates["afi"]},
        "static_files_per_s": {
            "median": static,
            "min": min(rates["static"]),
            "max": max(rates["static"]),
            "all": rates["static"],
        },
        "ratio": afi / static,
        # server CPU per read: what the server costs, whatever the (shared, busy) client machine does
        "server_cpu_us_per_read": cpu_us,
        "cpu_ratio": cpu_us["static"] / cpu_us["afi"] if cpu_us["afi"] else None,
        "mismatches": mismatches,
        "goal_met": afi / static >= GOAL_RATIO and mismatches == 0,
    }


def run(
    quick: bool = False,
    *,
    files: int | None = None,
    rounds: int | None = None,
    concurrency: int = 8,
    results_dir: Path | None = None,
) -> dict[str, Any]:
    """Run the HTTP read bench; print the table, write ``http_read.json``; return the figures."""
    n = files or (200 if quick else 1000)
    figures = measure(n, rounds=rounds or (3 if quick else 5), concurrency=concurrency)
    payload = {"bench": "http_read", "seed": SEED, "quick": quick, "goal_ratio": GOAL_RATIO, **figures}
    payload["comparisons"] = comparisons(
        comparison(
            f"HTTP read of {n:,} small files, {concurrency} in flight",
            "files/s",
            "higher",
            ours=("afi-memory /afi/read", figures["afi_files_per_s"]["median"]),
            baseline=("Starlette StaticFiles", figures["static_files_per_s"]["median"]),
        ),
    )
    print_table(
        f"http read: {n} files of 1-4 KiB, {figures['rounds']} rounds, concurrency {concurrency}",
        ("route", "files/s (median)", "min", "max"),
        [
            (label, f[key]["median"], f[key]["min"], f[key]["max"])
            for label, key, f in (
                ("/afi/read", "afi_files_per_s", figures),
                ("/static (StaticFiles)", "static_files_per_s", figures),
            )
        ],
    )
    console.print(
        f"ratio afi/static = {figures['ratio']:.2f} (goal >= {GOAL_RATIO}); bodies differing: {figures['mismatches']}"
    )
    cpu_us = figures["server_cpu_us_per_read"]
    console.print(
        f"server CPU per read: afi {cpu_us['afi']:.0f} us, static {cpu_us['static']:.0f} us "
        f"(static/afi = {figures['cpu_ratio'] or float('nan'):.2f})"
    )
    path = write_result("http_read", payload, results_dir)
    console.print(f"wrote {path}")
    return payload


def main(argv: Sequence[str] | None = None) -> int:
    """Given command-line arguments, run the bench (or, with --serve, the bench server); return the exit code."""
    parser = argparse.ArgumentParser(prog="python -m bench.http_read", description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=None, help="how many files (default 1000)")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds per route (default 5)")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.db, args.root)
        return 0
    run(args.quick, files=args.files, rounds=args.rounds, concurrency=args.concurrency, results_dir=args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
