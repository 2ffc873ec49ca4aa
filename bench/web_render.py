"""The web page's Markdown: server CPU per ``/ui/browse`` page of hostile Markdown, beside rendering it whole.

``python -m bench.web_render`` (or ``python -m bench web_render [--quick]``). The issue's render bombs
(a megabyte of ``[``, 250 KB of it, 200,000 links, a 100,000-column table, 500 KB of emphasis) and a
long README are written to ``/files`` of a real ``afi serve``; each page's CPU is read at the server
(``/proc``). The baseline is the page's previous code path: markdown-it-py rendering the same text
(its first MiB, what a page reads) in this process. Goal: every page ≤ 1 s of CPU.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from markdown_it import MarkdownIt

from ._common import RESULTS_DIR, comparison, comparisons, print_table, process_cpu, write_result

__all__ = ["bombs", "run"]

REPO = Path(__file__).resolve().parents[1]
SHOWN = 1 << 20  # a page reads a file's first MiB


def bombs(scale: float) -> dict[str, str]:
    """The issue's render bombs, ``scale`` times their size there (1.0: as the issue measured them)."""
    size = int(250_000 * scale)
    return {
        "brackets 1 MB": "[" * (4 * size),
        "brackets 250 KB": "[" * size,
        "200k links": "[a](b)" * int(200_000 * scale),
        "100k-column table": "|" + "a|" * int(100_000 * scale) + "\n|" + "-|" * int(100_000 * scale) + "\n",
        "500 KB emphasis": "*a" * size,
        "README": (REPO / "README.md").read_text(),
    }


def measure(scale: float) -> list[dict[str, Any]]:
    from tests.support.servers import start_afi_serve

    whole = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
    rows = []
    with tempfile.TemporaryDirectory(prefix="afi-bench-render-") as tmp:
        base = Path(tmp)
        with (
            start_afi_serve(base / "afi.db", base / "files") as server,
            httpx.Client(base_url=server.url, timeout=600) as http,
        ):
            assert server.process is not None
            for name, text in bombs(scale).items():
                path = f"/files/{name.replace(' ', '-')}.md"
                http.put("/afi/write", params={"path": path}, content=text.encode()).raise_for_status()
                cpu, started = process_cpu(server.process.pid), time.perf_counter()
                page = http.get("/ui/browse", params={"path": path})
                page.raise_for_status()
                wall = time.perf_counter() - started
                ours = process_cpu(server.process.pid) - cpu
                started = time.process_time()
                whole.render(text.encode()[:SHOWN].decode("utf-8", "ignore"))
                before = time.process_time() - started
                rows.append({"page": name, "chars": len(text), "rendered": '<article class="content">' in page.text,
                             "wall_ms": round(wall * 1000, 1), "cpu_ms": round(ours * 1000, 1),
                             "whole_render_cpu_ms": round(before * 1000, 1)})  # fmt: skip
    return rows


def run(*, quick: bool = False, results_dir: Path | None = None) -> dict[str, Any]:
    """Measure every page (a tenth of the sizes with ``quick``); print, write and return the figures."""
    rows = measure(0.1 if quick else 1.0)
    columns = ["page", "chars", "rendered", "wall_ms", "cpu_ms", "whole_render_cpu_ms"]
    print_table("/ui/browse of hostile Markdown: server CPU per page", columns, [[r[c] for c in columns] for r in rows])
    worst = max(rows, key=lambda r: r["cpu_ms"])
    worst_before = max(rows, key=lambda r: r["whole_render_cpu_ms"])
    baseline = ("markdown-it render of the whole text", worst_before["whole_render_cpu_ms"])
    pair = comparison("worst page, server CPU", "ms", "lower", ours=("/ui/browse", worst["cpu_ms"]), baseline=baseline)
    payload = {
        "bench": "web_render",
        "pages": rows,
        "goals_met": {"every_page_1s_cpu": worst["cpu_ms"] <= 1000},
        "comparisons": comparisons(pair),
    }
    write_result("web_render", payload, results_dir)
    return payload


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.web_render", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    run(quick=args.quick, results_dir=args.results_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
