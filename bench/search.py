"""Exact and regex search through the provider vs ripgrep and grep over the same tree on disk.

``python -m bench.search [--sizes 10000,100000] [--runs 20] [--results-dir DIR]`` (or ``python -m
bench search``). A store of N fact notes is built through the fabric (``consolidate=False``, large
transactions), and the tree a search of ``/`` walks (``/facts/<name>.md``, the exact rendered bytes;
``/history`` is left out of a walk from ``/``, as a file server leaves out its snapshots) is written
out as files, so every side searches identical bytes. Each query
runs once on every side before timing (warm page cache), and the sets of matching files must agree.

Queries: a selective phrase planted in 0.5% of the notes and a broad one in 8.3%, each as an exact
and as a regex query. Goals: the selective first page (limit 100) at least 10x faster than the faster
of rg and grep with p50 <= 10 ms; the broad query paged to the end never slower than them.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from afi.model import SearchQuery, SearchRequest
from afi.provider import Caller

from ._common import RESULTS_DIR, comparison, comparisons, console, percentile, print_table, write_result

__all__ = ["CASES", "SearchCase", "build_store", "export_tree", "measure", "note_text", "run", "tool_files"]

from ._search_corpus import (
    CASES,
    FIRST_PAGE,
    GOAL_P50_MS,
    GOAL_SPEEDUP,
    SEED,
    SPACE,
    SearchCase,
    build_store,
    check_export,
    export_tree,
    note_text,
)


def _timed(fn: Callable[[], Any], runs: int, *, budget: float, warm: bool = True) -> tuple[list[float], Any]:
    """Run fn ``runs`` times (after one untimed warm-up run), fewer once ``budget`` seconds are spent.

    Returns the samples in milliseconds (at least one) and the last result.
    """
    if warm:
        fn()  # warm: page cache, SQLite cache, compiled regexes
    samples: list[float] = []
    last, spent = None, 0.0
    while len(samples) < runs and (not samples or spent < budget):
        start = time.perf_counter()
        last = fn()
        took = time.perf_counter() - start
        samples.append(took * 1000)
        spent += took
        if isinstance(last, _Paged) and not last.complete:
            break
    return samples, last


def _stats(samples: Sequence[float]) -> dict[str, float]:
    return {
        "p50": percentile(samples, 50),
        "p95": percentile(samples, 95),
        "mean": statistics.fmean(samples),
        "runs": len(samples),
    }


def tool_files(tool: str, case: SearchCase, root: Path) -> set[str]:
    """Given ``rg`` or ``grep``, a case and a tree, return the matching files (relative POSIX paths)."""
    if tool == "rg":
        argv = ["rg", "-l", *(["-F"] if case.fixed else []), "--", case.pattern, str(root)]
    else:
        argv = ["grep", "-rl", "-F" if case.fixed else "-E", "--", case.pattern, str(root)]
    done = subprocess.run(argv, capture_output=True, check=False)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[:300]}")
    return {Path(line).relative_to(root).as_posix() for line in done.stdout.decode().splitlines() if line}


@dataclass(frozen=True)
class _Paged:
    files: set[str]
    matches: int
    pages: int
    complete: bool


def _all_pages(provider: Any, caller: Caller, query: SearchQuery, limit: int, budget: float) -> _Paged:
    """Follow cursors to the end, or until ``budget`` seconds pass (then ``complete`` is False)."""
    files: set[str] = set()
    cursor, matches, pages = None, 0, 0
    deadline = time.perf_counter() + budget
    while True:
        page = provider.search(caller, SearchRequest(query=query, path="/", limit=limit, cursor=cursor))
        pages += 1
        matches += len(page.matches)
        files.update(m.path.lstrip("/") for m in page.matches)
        cursor = page.next_cursor
        if cursor is None or time.perf_counter() > deadline:
            return _Paged(files, matches, pages, cursor is None)


def measure_case(
    provider: Any,
    caller: Caller,
    case: SearchCase,
    root: Path,
    notes: int,
    *,
    runs: int,
    page_limit: int,
    budget: float,
) -> dict[str, Any]:
    """Time one case on every side; return its figures (and whether the sides found the same files).

    Each measurement stops repeating once ``budget`` seconds are spent; paging to the end stops at
    the budget too, and then its time is a lower bound (``complete: false``).
    """
    slow_runs = max(3, runs // 4)
    first, page = _timed(
        lambda: provider.search(caller, SearchRequest(query=case.query, path="/", limit=FIRST_PAGE)),
        runs,
        budget=budget,
    )
    every, paged = _timed(
        lambda: _all_pages(provider, caller, case.query, page_limit, budget), slow_runs, budget=budget, warm=False
    )
    rg, rg_files = _timed(lambda: tool_files("rg", case, root), slow_runs, budget=budget)
    grep, grep_files = _timed(lambda: tool_files("grep", case, root), slow_runs, budget=budget)
    stats = {"first": _stats(first), "every": _stats(every), "rg": _stats(rg), "grep": _stats(grep)}
    best = min(stats["rg"]["p50"], stats["grep"]["p50"])
    if paged.complete:
        agree = paged.files == rg_files == grep_files
        matching_notes = len({f for f in paged.files if f.startswith("facts/")})
    else:  # what was paged must be among the tools' files
        agree = paged.files <= rg_files == grep_files
        matching_notes = len({f for f in rg_files if f.startswith("facts/")})
    return {
        "name": case.name,
        "mode": "exact" if case.fixed else "regex",
        "pattern": case.pattern,
        "matching_notes": matching_notes,
        "match_fraction": matching_notes / notes,
        "matching_files": len(rg_files),
        "first_page_matches": len(page.matches),
        "provider_first_page_ms": stats["first"],
        "provider_all_pages_ms": {
            **stats["every"],
            "pages": paged.pages,
            "matches": paged.matches,
            "limit": page_limit,
            "complete": paged.complete,
        },
        "rg_ms": stats["rg"],
        "grep_ms": stats["grep"],
        "best_tool": "rg" if stats["rg"]["p50"] <= stats["grep"]["p50"] else "grep",
        "first_page_speedup": best / stats["first"]["p50"],
        # when paging stopped at the budget, the time is a lower bound and this an upper bound
        "all_pages_speedup": best / stats["every"]["p50"],
        "agree": agree,
    }


def _goals(cases: list[dict[str, Any]]) -> dict[str, bool]:
    selective = [c for c in cases if c["name"].startswith("selective")]
    broad = [c for c in cases if c["name"].startswith("broad")]
    return {
        "selective_first_page_10x": all(c["first_page_speedup"] >= GOAL_SPEEDUP for c in selective),
        "selective_first_page_p50_10ms": all(c["provider_first_page_ms"]["p50"] <= GOAL_P50_MS for c in selective),
        "broad_all_pages_not_slower": all(
            c["all_pages_speedup"] >= 1.0 and c["provider_all_pages_ms"]["complete"] for c in broad
        ),
        "all_agree": all(c["agree"] for c in cases),
    }


def measure(
    notes: int, *, runs: int = 20, page_limit: int = FIRST_PAGE, budget: float = 60.0, workdir: Path | None = None
) -> dict[str, Any]:
    """Given a note count, build the store and its tree, time every case; return the figures."""
    from afi.providers.memory.provider import MemoryProvider

    with tempfile.TemporaryDirectory(prefix="afi-bench-search-", dir=workdir) as tmp:
        base = Path(tmp)
        db, tree = base / "afi.db", base / "tree"
        start = time.perf_counter()
        build_store(db, notes)
        built = time.perf_counter() - start
        start = time.perf_counter()
        files = export_tree(db, tree)
        exported = time.perf_counter() - start
        provider = MemoryProvider(db, base / "files")
        caller = Caller(principal="local", space=SPACE)
        check_export(provider, caller, tree)
        cases = [
            measure_case(provider, caller, c, tree, notes, runs=runs, page_limit=page_limit, budget=budget)
            for c in CASES
        ]
        db_bytes = sum(p.stat().st_size for p in base.glob("afi.db*"))
    return {
        "notes": notes,
        "files": files,
        "db_bytes": db_bytes,
        "build_seconds": built,
        "export_seconds": exported,
        "cases": cases,
        "goals_met": _goals(cases),
    }


def _paged_cell(every: dict[str, Any]) -> str:
    if every["complete"]:
        return f"{every['p50']:.1f} ({every['pages']})"
    return f">{every['p50']:.0f} ({every['pages']}+, stopped)"


def _print(results: list[dict[str, Any]]) -> None:
    rows = []
    for size in results:
        for c in size["cases"]:
            rows.append(
                (
                    f"{size['notes']:,} {c['name']}",
                    f"{c['match_fraction']:.2%}",
                    c["provider_first_page_ms"]["p50"],
                    c["provider_first_page_ms"]["p95"],
                    _paged_cell(c["provider_all_pages_ms"]),
                    c["rg_ms"]["p50"],
                    c["grep_ms"]["p50"],
                    f"{c['first_page_speedup']:.1f}x",
                    f"{c['all_pages_speedup']:.2f}x",
                    "yes" if c["agree"] else "NO",
                )
            )
    columns = ("notes / case", "match", "1st p50 ms", "1st p95 ms", "all ms (pages)", "rg ms", "grep ms",
               "1st vs best", "all vs best", "agree")  # fmt: skip
    print_table("search: provider vs rg / grep (p50 over the runs)", columns, rows)
    for size in results:
        console.print(f"{size['notes']:,} notes, goals met: {size['goals_met']}")


def _comparisons(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Given each size's figures, return the pairs README states: a selective query's first page and a
    broad query paged to the end, each against the faster of rg and grep on the same tree."""
    pairs = []
    for size in results:
        for case in size["cases"]:
            selective = case["name"].startswith("selective")
            ours = case["provider_first_page_ms"] if selective else case["provider_all_pages_ms"]
            tool = case["best_tool"]
            what = "selective, first page" if selective else f"broad ({case['match_fraction']:.1%}), all pages"
            if not selective and not ours["complete"]:
                what += " (stopped at the budget: a lower bound)"
            pairs.append(
                comparison(
                    f"{case['mode']} search, {size['notes']:,} notes, {what}, p50",
                    "ms",
                    "lower",
                    ours=("afi-memory", ours["p50"]),
                    baseline=(f"{tool} (the faster of rg, grep)", case[f"{tool}_ms"]["p50"]),
                )
            )
    return comparisons(*pairs)


def run(
    quick: bool = False,
    *,
    sizes: Sequence[int] | None = None,
    runs: int | None = None,
    page_limit: int = FIRST_PAGE,
    budget: float | None = None,
    results_dir: Path | None = None,
) -> dict[str, Any]:
    """Run the search bench at each size; print the table, write ``search.json``; return the figures."""
    for tool in ("rg", "grep"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench search needs {tool} on PATH (apt-get install ripgrep grep)")
    sizes = list(sizes or ((2000,) if quick else (10_000, 100_000)))
    runs = runs or (5 if quick else 20)
    budget = budget or (20.0 if quick else 60.0)
    results = [measure(n, runs=runs, page_limit=page_limit, budget=budget) for n in sizes]
    payload = {
        "bench": "search",
        "seed": SEED,
        "quick": quick,
        "runs": runs,
        "first_page_limit": FIRST_PAGE,
        "budget_seconds": budget,
        "goals": {
            "selective_first_page_speedup": GOAL_SPEEDUP,
            "selective_first_page_p50_ms": GOAL_P50_MS,
            "broad_all_pages_speedup": 1.0,
        },
        "sizes": results,
        "comparisons": _comparisons(results),
    }
    _print(results)
    path = write_result("search", payload, results_dir)
    console.print(f"wrote {path}")
    return payload


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated note counts, not {text!r}") from None
    if any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError("note counts must be positive")
    return sizes


def main(argv: Sequence[str] | None = None) -> int:
    """Given command-line arguments, run the bench; return the exit code."""
    parser = argparse.ArgumentParser(prog="python -m bench.search", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=_sizes, default=None, help="comma-separated note counts (default 10000,100000)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs of the first page (default 20)")
    parser.add_argument("--page-limit", type=int, default=FIRST_PAGE, help="page size when paging to the end")
    parser.add_argument("--budget", type=float, default=None, help="seconds per measurement (default 60)")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    run(
        args.quick,
        sizes=args.sizes,
        runs=args.runs,
        page_limit=args.page_limit,
        budget=args.budget,
        results_dir=args.results_dir,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
