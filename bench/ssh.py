"""SSH latency: ``grep -r`` over an open connection and a fresh ``ssh host cat FILE``, against HTTP in the same run.

``python -m bench.ssh [--files 300] [--samples 40]``. Files are written through the provider; one
``afi ssh`` and one ``afi serve`` (limits off, keyless on loopback) serve the same store. Measured:

- ``grep -r canary /`` as one exec channel on an open asyncssh connection (the whole answer read),
  against the same search over HTTP (``POST /afi/search``, every page) on an open httpx connection.
- ``ssh -p PORT 127.0.0.1 cat FILE`` with OpenSSH's binary (a new connection each time), against
  a ``GET /afi/read`` on a new HTTP connection.

Goal: the open-connection grep within 2x of HTTP. Ratios, never absolute times, are the result.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from afi.provider import Caller

from ._common import comparison, comparisons, corpus, print_table, write_result

__all__ = ["GOAL_RATIO", "measure", "run"]

SEED = 20261129
GOAL_RATIO = 2.0
_ADDRESS = re.compile(r"afi: listening on (ssh|http)://[0-9.]+:(\d+)")
_SSH = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes"]
_SSH += ["-o", "LogLevel=error", "-F", "/dev/null", "-o", "IdentityAgent=none"]


def _write_tree(db: Path, root: Path, n: int) -> str:
    """Write n files (every 10th holds the canary) and a few notes; return one file's path."""
    from afi.providers.memory.provider import MemoryProvider

    provider = MemoryProvider(db, root)
    owner = Caller("local")
    lines = corpus(n * 4, seed=SEED)
    for i in range(n):
        body = "\n".join(lines[i * 4 : i * 4 + 4]) + ("\nthe canary sings\n" if i % 10 == 0 else "\n")
        provider.write(owner, f"/files/d{i % 8}/f{i:04d}.txt", body.encode())
    for i in range(20):
        provider.write(owner, f"/facts/n{i:02d}.md", f"{lines[i]} (canary {i})".encode())
    return "/files/d0/f0000.txt"


@contextmanager
def _afi(args: list[str], home: Path) -> Iterator[int]:
    cmd = [sys.executable, "-c", "from afi.cli import main; main()", *args]
    env = dict(os.environ, XDG_DATA_HOME=str(home))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, ""):
            found = _ADDRESS.search(line)
            if found:
                yield int(found.group(2))
                return
        raise RuntimeError(f"afi {args[0]} did not start")
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


async def _ssh_greps(port: int, samples: int) -> tuple[list[float], bytes]:
    import asyncssh

    times: list[float] = []
    out = b""
    async with asyncssh.connect(
        "127.0.0.1", port, known_hosts=None, username="bench", client_keys=None, agent_path=None
    ) as conn:
        for _ in range(samples + 3):
            start = time.perf_counter()
            result = await conn.run("grep -r canary /", encoding=None, check=True)
            times.append(time.perf_counter() - start)
            out = result.stdout if isinstance(result.stdout, bytes) else b""
    return times[3:], out


def _http_greps(url: str, samples: int) -> tuple[list[float], int]:
    times: list[float] = []
    count = 0
    with httpx.Client(base_url=url, timeout=30) as client:
        for _ in range(samples + 3):
            start = time.perf_counter()
            body: dict[str, Any] = {"query": "canary", "path": "/", "limit": 1000}
            matches = 0
            while True:
                page = client.post("/afi/search", json=body).json()
                matches += len(page["matches"])
                if not page.get("next_cursor"):
                    break
                body["cursor"] = page["next_cursor"]
            times.append(time.perf_counter() - start)
            count = matches
    return times[3:], count


def _fresh_cats(port: int, path: str, samples: int) -> list[float]:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        subprocess.run(["ssh", "-p", str(port), *_SSH, "127.0.0.1", "cat", path], capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return times


def _fresh_reads(url: str, path: str, samples: int) -> list[float]:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        with httpx.Client(base_url=url, timeout=30) as client:
            client.get("/afi/read", params={"path": path}).raise_for_status()
        times.append(time.perf_counter() - start)
    return times


def measure(files: int, samples: int) -> dict[str, Any]:
    """Given a tree size and a sample count, serve one store over SSH and HTTP; return the figures."""
    with tempfile.TemporaryDirectory(prefix="afi-bench-ssh-") as tmp:
        base = Path(tmp)
        db, root = base / "afi.db", base / "files"
        one_file = _write_tree(db, root, files)
        store = ["--db", str(db), "--root", str(root), "--port", "0"]
        with (
            _afi(["ssh", *store, "--conn-rate", "0", "--cmd-rate", "0"], base / "xdg") as ssh_port,
            _afi(["serve", *store, "--no-mcp"], base / "xdg") as http_port,
        ):
            url = f"http://127.0.0.1:{http_port}"
            ssh_grep, output = asyncio.run(_ssh_greps(ssh_port, samples))
            http_grep, matches = _http_greps(url, samples)
            ssh_cat = _fresh_cats(ssh_port, one_file, max(5, samples // 4))
            http_read = _fresh_reads(url, one_file, max(5, samples // 4))
    printed = output.count(b"\n")
    if printed != matches:
        raise RuntimeError(f"grep printed {printed} lines, HTTP found {matches} matches")
    med = {k: statistics.median(v) for k, v in {"ssh_grep": ssh_grep, "http_grep": http_grep}.items()}
    fresh = {"ssh_cat": statistics.median(ssh_cat), "http_read": statistics.median(http_read)}
    ratio = med["ssh_grep"] / med["http_grep"]
    return {
        "files": files,
        "matches": matches,
        "samples": samples,
        "open_grep_ms": {k: v * 1000 for k, v in med.items()},
        "open_grep_ratio": ratio,
        "fresh_ms": {k: v * 1000 for k, v in fresh.items()},
        "fresh_ratio": fresh["ssh_cat"] / fresh["http_read"],
        "goal_ratio": GOAL_RATIO,
        "goal_met": ratio <= GOAL_RATIO,
    }


def run(*, quick: bool = False, files: int = 300, samples: int = 40) -> dict[str, Any]:
    """Run the benchmark (``quick``: a small tree, few samples); print and store the figures."""
    figures = measure(60 if quick else files, 8 if quick else samples)
    grep, fresh = figures["open_grep_ms"], figures["fresh_ms"]
    rows = [
        ["grep -r, open connection (ms)", grep["ssh_grep"], grep["http_grep"], figures["open_grep_ratio"]],
        ["fresh connection: cat / GET (ms)", fresh["ssh_cat"], fresh["http_read"], figures["fresh_ratio"]],
    ]
    title = f"SSH vs HTTP, {figures['files']} files, {figures['matches']} matches"
    print_table(title, ["", "ssh", "http", "ratio"], rows)
    figures["comparisons"] = comparisons(
        comparison(
            f"grep -r over {figures['files']} files, open connection",
            "ms",
            "lower",
            ours=("afi ssh", grep["ssh_grep"]),
            baseline=("the same search over HTTP", grep["http_grep"]),
        ),
        comparison(
            "read one file on a fresh connection",
            "ms",
            "lower",
            ours=("ssh host cat FILE", fresh["ssh_cat"]),
            baseline=("fresh HTTP GET /afi/read", fresh["http_read"]),
        ),
    )
    write_result("ssh", figures)
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    run(quick=options.quick, files=options.files, samples=options.samples)
