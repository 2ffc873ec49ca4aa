"""Big folders: a folder of N files put on disk behind the server's back, listed, browsed and searched.

``python -m bench.folders [--files 100000]`` (or ``python -m bench folders [--quick]``). The files
(``f000000.txt`` …, a line each) are made on disk, then a real ``afi serve`` over that root answers
every page of ``GET /afi/list`` (limits 100 and 1000), the web page's ``/ui/browse`` of the folder,
and an exact search (limit 10) from its first page to its last, then again once the index has
caught up. Each page's wall time is taken at the client and its CPU at the server (``/proc``). The
baselines: ``os.scandir`` of the same folder with a ``stat`` of each entry and a sort (what every
list page cost before), and ``grep -rl`` of the folder for the search. Goal: ≤ 50 ms a list page
and ≤ 1 s for the first search page at 100,000 files.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from ._common import RESULTS_DIR, comparison, comparisons, print_table, process_cpu, write_result

__all__ = ["run"]

QUERY = "line 4242"


def _make(folder: Path, n: int) -> None:
    folder.mkdir(parents=True)
    for i in range(n):
        (folder / f"f{i:06d}.txt").write_bytes(b"line %d\n" % i)


def _scandir_ms(folder: Path) -> float:
    """One read of the whole folder as a list page did before: scandir, a stat of each entry, a sort."""
    started = time.perf_counter()
    with os.scandir(folder) as entries:
        found = sorted((e.name, e.stat(follow_symlinks=False).st_size) for e in entries)
    assert found
    return (time.perf_counter() - started) * 1000


def _pages(http: httpx.Client, pid: int, method: str, route: str, args: dict[str, Any]) -> list[tuple[float, float]]:
    """Follow a listing's or a search's cursors to the end; return each page's (wall ms, server CPU ms)."""
    out, cursor = [], None
    while True:
        cpu, started = process_cpu(pid), time.perf_counter()
        if method == "GET":
            answer = http.get(route, params={**args, **({"cursor": cursor} if cursor else {})})
        else:
            answer = http.post(route, json={**args, **({"cursor": cursor} if cursor else {})})
        out.append(((time.perf_counter() - started) * 1000, (process_cpu(pid) - cpu) * 1000))
        answer.raise_for_status()
        cursor = answer.json().get("next_cursor")
        if not cursor:
            return out


def _figures(pages: list[tuple[float, float]]) -> dict[str, Any]:
    walls, cpus = [w for w, _ in pages], [c for _, c in pages]
    return {"pages": len(pages), "first_ms": round(walls[0], 1), "p50_ms": round(statistics.median(walls), 1),
            "max_ms": round(max(walls), 1), "cpu_p50_ms": round(statistics.median(cpus), 1),
            "total_s": round(sum(walls) / 1000, 2)}  # fmt: skip


def measure(n: int) -> dict[str, Any]:
    from tests.support.servers import start_afi_serve

    with tempfile.TemporaryDirectory(prefix="afi-bench-folders-") as tmp:
        base = Path(tmp)
        folder = base / "files" / "default" / "big"
        started = time.perf_counter()
        _make(folder, n)
        made_s = time.perf_counter() - started
        time.sleep(2.2)  # a folder filled a while ago, as the was
        scandir = [_scandir_ms(folder) for _ in range(3)]
        started = time.perf_counter()
        grep = subprocess.run(["grep", "-rl", QUERY, str(folder)], capture_output=True, check=False)
        grep_ms = (time.perf_counter() - started) * 1000
        with (
            start_afi_serve(base / "afi.db", base / "files") as server,
            httpx.Client(base_url=server.url, timeout=600) as http,
        ):
            assert server.process is not None
            pid = server.process.pid
            search = {"query": QUERY, "path": "/files", "limit": 10}
            first_search = _figures(_pages(http, pid, "POST", "/afi/search", search))
            list_100 = _figures(_pages(http, pid, "GET", "/afi/list", {"path": "/files/big", "limit": 100}))
            list_1000 = _figures(_pages(http, pid, "GET", "/afi/list", {"path": "/files/big", "limit": 1000}))
            cpu, started = process_cpu(pid), time.perf_counter()
            http.get("/ui/browse", params={"path": "/files/big"}).raise_for_status()
            wall, cpu = time.perf_counter() - started, process_cpu(pid) - cpu
            browse = {"ms": round(wall * 1000, 1), "cpu_ms": round(cpu * 1000)}
            again = _figures(_pages(http, pid, "POST", "/afi/search", search))
    return {"files": n, "made_s": round(made_s, 1), "scandir_ms": round(statistics.median(scandir), 1),
            "grep_ms": round(grep_ms, 1), "grep_files": len(grep.stdout.splitlines()), "list_100": list_100,
            "list_1000": list_1000, "browse": browse, "search_first": first_search, "search_again": again}  # fmt: skip


_COLUMNS = ("pages", "first_ms", "p50_ms", "max_ms", "cpu_p50_ms")


def run(*, quick: bool = False, files: int | None = None, results_dir: Path | None = None) -> dict[str, Any]:
    """Measure a folder of ``files`` files (100,000; 5,000 with ``quick``); print, write and return it."""
    n = files or (5000 if quick else 100_000)
    found = measure(n)
    rows: list[tuple[Any, ...]] = [
        (label, *(found[key][k] for k in _COLUMNS))
        for label, key in (("list, limit 100", "list_100"), ("list, limit 1000", "list_1000"),
                           ("search, first pass", "search_first"), ("search, caught up", "search_again"))
    ]  # fmt: skip
    browse, scan_ms, grep_ms = found["browse"], found["scandir_ms"], found["grep_ms"]
    rows += [("/ui/browse", 1, browse["ms"], browse["ms"], browse["ms"], browse["cpu_ms"]),
             ("baseline: scandir+stat+sort", 1, scan_ms, scan_ms, scan_ms, scan_ms),
             ("baseline: grep -rl", 1, grep_ms, grep_ms, grep_ms, grep_ms)]  # fmt: skip
    columns = ["what", "pages", "first ms", "p50 ms", "max ms", "CPU p50 ms"]
    print_table(f"a folder of {n:,} files: each page", columns, rows)
    scan = ("os.scandir + stat + sort of the folder", scan_ms)
    pairs = [
        *(comparison(f"list page of {size}, p50", "ms", "lower", ours=("afi list", found[f"list_{size}"]["p50_ms"]),
                     baseline=scan) for size in (100, 1000)),
        comparison("first search page, never indexed", "ms", "lower",
                   ours=("afi search", found["search_first"]["first_ms"]), baseline=("grep -rl", grep_ms)),
    ]  # fmt: skip
    goals = {"list_page_50ms": found["list_1000"]["p50_ms"] <= 50,
             "first_search_page_1s": found["search_first"]["first_ms"] <= 1000}  # fmt: skip
    payload = {"bench": "folders", **found, "goals_met": goals, "comparisons": comparisons(*pairs)}
    write_result("folders", payload, results_dir)
    return payload


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.folders", description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=None, help="how many files (default 100,000)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    if args.files is not None and args.files < 1:
        parser.error("--files takes a positive number")
    run(quick=args.quick, files=args.files, results_dir=args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
