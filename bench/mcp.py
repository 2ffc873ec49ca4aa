"""MCP tool-call latency, each side by side with a baseline measured in the same run.

``python -m bench.mcp [--calls 300] [--quick]``.

1. Streamable HTTP: ``afi.stat``, ``afi.read`` and ``afi.search`` (exact) through the official SDK
   client against a real ``afi serve``, next to the same verb over the HTTP binding (httpx, keep-alive)
   on the same server. Goal: MCP p50 at most 2x the HTTP binding's.
2. stdio: ``afi.read`` and ``afi.search`` (exact) of ``afi mcp`` next to ``read_text_file`` and
   ``search_files`` of the reference server (npm ``@modelcontextprotocol/server-filesystem``, run with
   the machine's Node.js) over the same file, both driven by the official client. Goal: no slower.
   The reference speaks only the 2025-11-25 protocol revision, so the goal is checked with ``afi mcp``
   on that revision too (like for like); a second table shows ``afi mcp`` on the newest revision the
   client negotiates with it (2026-07-28), whose per-request envelope the SDK's server handles with
   more work per call.

Calls alternate between the two sides in small batches so both see the same machine load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import Client, StdioServerParameters

from ._common import comparison, comparisons, console, corpus, percentile, print_table, write_result

__all__ = ["run"]

AFI = [sys.executable, "-c", "from afi.cli import main; main()"]
FILESYSTEM = "@modelcontextprotocol/server-filesystem@2026.8.31"
NPM_CACHE = Path(os.environ.get("AFI_NPM_CACHE", Path.home() / ".cache" / "afi-npm"))
HTTP_GOAL, STDIO_GOAL = 2.0, 1.0
Call = Callable[[], Awaitable[Any]]


def _start_serve(db: Path, root: Path) -> tuple[subprocess.Popen[str], str]:
    cmd = [*AFI, "serve", "--host", "127.0.0.1", "--port", "0", "--db", str(db), "--root", str(root)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("afi: listening on "):
        proc.kill()
        raise RuntimeError(f"afi serve did not start: {line!r}")
    return proc, line.split()[3]


def _seed(db: Path, root: Path) -> str:
    from afi.provider import Caller
    from afi.providers.memory.provider import MemoryProvider

    provider = MemoryProvider(db, root)
    text = "\n".join(corpus(40, seed=7)) + "\nthe needle line\n"
    provider.write(Caller("local"), "/files/bench/doc.txt", text.encode())
    return text


async def _timed(pairs: Mapping[str, tuple[Call, Call]], calls: int) -> dict[str, dict[str, list[float]]]:
    """Given name → (ours, baseline), time each ``calls`` times, alternating in batches of 10."""
    samples: dict[str, dict[str, list[float]]] = {name: {"ours": [], "base": []} for name in pairs}
    for name, (ours, base) in pairs.items():
        for fn in (ours, base):  # warm-up
            for _ in range(5):
                await fn()
        for _ in range(0, calls, 10):
            for side, fn in (("ours", ours), ("base", base)):
                for _ in range(10):
                    start = time.perf_counter()
                    await fn()
                    samples[name][side].append((time.perf_counter() - start) * 1000)
    return samples


def _rows(samples: dict[str, dict[str, list[float]]]) -> list[list[Any]]:
    rows = []
    for name, sides in samples.items():
        ours50, base50 = percentile(sides["ours"], 50), percentile(sides["base"], 50)
        ours95, base95 = percentile(sides["ours"], 95), percentile(sides["base"], 95)
        rows.append([name, ours50, ours95, base50, base95, ours50 / base50])
    return rows


def _figures(rows: list[list[Any]]) -> dict[str, dict[str, float]]:
    keys = ("p50", "p95", "base_p50", "base_p95", "ratio")
    return {row[0]: dict(zip(keys, row[1:], strict=True)) for row in rows}


def _checked(result: Any) -> Any:
    if getattr(result, "is_error", False):
        raise RuntimeError(f"a benchmarked call failed: {result.content}")
    return result


async def _http_side(url: str, calls: int, mode: str) -> dict[str, dict[str, list[float]]]:
    search_body = {"query": "needle", "path": "/files/bench"}
    async with httpx.AsyncClient(base_url=url) as http, Client(url + "/mcp", mode=mode, cache=None) as mcp:

        async def stat() -> Any:
            return _checked(await mcp.call_tool("afi.stat", {"path": "/files/bench/doc.txt"}))

        async def read() -> Any:
            return _checked(await mcp.call_tool("afi.read", {"path": "/files/bench/doc.txt"}))

        async def search() -> Any:
            return _checked(await mcp.call_tool("afi.search", search_body))

        async def h_stat() -> Any:
            return (await http.get("/afi/stat", params={"path": "/files/bench/doc.txt"})).raise_for_status()

        async def h_read() -> Any:
            return (await http.get("/afi/read", params={"path": "/files/bench/doc.txt"})).raise_for_status()

        async def h_search() -> Any:
            return (await http.post("/afi/search", json=search_body)).raise_for_status()

        pairs = {"afi.stat": (stat, h_stat), "afi.read": (read, h_read), "afi.search": (search, h_search)}
        return await _timed(pairs, calls)


async def _stdio_side(
    db: Path, root: Path, folder: Path, calls: int, eras: dict[str, str], mode: str
) -> dict[str, dict[str, list[float]]]:
    ours = StdioServerParameters(command=AFI[0], args=[*AFI[1:], "mcp", "--db", str(db), "--root", str(root)])
    env = {**os.environ, "npm_config_cache": str(NPM_CACHE), "npm_config_update_notifier": "false"}
    peer = StdioServerParameters(command="npx", args=["-y", FILESYSTEM, str(folder)], env=env)
    target = str(folder / "doc.txt")
    async with Client(ours, cache=None, mode=mode) as afi, Client(peer, cache=None) as reference:
        eras.update(afi=str(afi.protocol_version), reference=str(reference.protocol_version))

        async def read() -> Any:
            return _checked(await afi.call_tool("afi.read", {"path": "/files/bench/doc.txt"}))

        async def search() -> Any:
            return _checked(await afi.call_tool("afi.search", {"query": "needle", "path": "/files/bench"}))

        async def ref_read() -> Any:
            return _checked(await reference.call_tool("read_text_file", {"path": target}))

        async def ref_search() -> Any:
            # a glob that finds the one file, so both sides answer one hit (a pattern that matches nothing
            # would make the reference's answer a bare "No matches found")
            return _checked(await reference.call_tool("search_files", {"path": str(folder), "pattern": "doc*"}))

        return await _timed({"afi.read": (read, ref_read), "afi.search": (search, ref_search)}, calls)


def _comparisons(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Given the figures, return each verb's p50 beside its baseline: Streamable HTTP as a client opens it
    (the newest revision) against the HTTP binding, and stdio on each revision against the reference."""
    reference = {"afi.read": "read_text_file", "afi.search": "search_files"}
    pairs = []
    for verb, f in result["http_auto"].items():
        pairs.append(
            comparison(
                f"{verb} p50, Streamable HTTP",
                "ms",
                "lower",
                ours=("MCP Streamable HTTP", f["p50"]),
                baseline=("HTTP binding, same server", f["base_p50"]),
            )
        )
    for key in ("stdio", "stdio_newest"):
        figures = result.get(key)
        if not isinstance(figures, dict):  # "skipped: no Node.js"
            continue
        eras = figures["protocol_versions"]
        for verb, name in reference.items():
            pairs.append(
                comparison(
                    f"{verb} p50, stdio, afi on {eras['afi']}, reference on {eras['reference']}",
                    "ms",
                    "lower",
                    ours=("afi mcp", figures[verb]["p50"]),
                    baseline=(f"server-filesystem {name}", figures[verb]["base_p50"]),
                )
            )
    return comparisons(*pairs)


def run(quick: bool = False, calls: int | None = None) -> dict[str, Any]:
    """Run both comparisons; print them, write ``bench/results/mcp.json`` and return the figures."""
    calls = calls or (60 if quick else 300)
    result: dict[str, Any] = {"calls": calls}
    with tempfile.TemporaryDirectory(prefix="afi-bench-mcp-") as tmp:
        db, root = Path(tmp) / "afi.db", Path(tmp) / "files"
        _seed(db, root)
        proc, url = _start_serve(db, root)
        try:
            for mode in ("auto", "legacy"):
                samples = anyio.run(_http_side, url, calls, mode)
                rows = _rows(samples)
                title = f"MCP Streamable HTTP ({mode} era) vs the HTTP binding, ms (goal: ratio <= {HTTP_GOAL})"
                print_table(title, ["verb", "mcp p50", "mcp p95", "http p50", "http p95", "p50 ratio"], rows)
                result[f"http_{mode}"] = {
                    r[0]: dict(zip(("p50", "p95", "base_p50", "base_p95", "ratio"), r[1:], strict=True)) for r in rows
                }
        finally:
            proc.terminate()
            proc.wait(10)
        if shutil.which("npx") is None:
            console.print("stdio comparison skipped: Node.js (npx) is not installed")
            result["stdio"] = "skipped: no Node.js"
        else:
            for key, mode in (("stdio", "legacy"), ("stdio_newest", "auto")):
                eras: dict[str, str] = {}
                samples = anyio.run(_stdio_side, db, root, root / "default" / "bench", calls, eras, mode)
                rows = _rows(samples)
                goal = f" (goal: ratio <= {STDIO_GOAL})" if key == "stdio" else ""
                title = (
                    f"stdio: afi mcp (protocol {eras['afi']}) vs @modelcontextprotocol/server-filesystem "
                    f"(protocol {eras['reference']}), ms{goal}"
                )
                print_table(title, ["verb", "afi p50", "afi p95", "ref p50", "ref p95", "p50 ratio"], rows)
                result[key] = {**_figures(rows), "protocol_versions": eras}
    result["comparisons"] = _comparisons(result)
    path = write_result("mcp", result)
    console.print(f"written to {path}")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=None)
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args()
    run(quick=options.quick, calls=options.calls)
