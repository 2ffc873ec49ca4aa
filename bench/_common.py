"""What every benchmark shares: where results go, the comparisons it states, a rich table, percentiles,
a seeded text corpus.

Results go to ``bench/results/`` unless ``AFI_BENCH_RESULTS`` names another folder (the tests use it).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = [
    "RESULTS_DIR",
    "comparison",
    "comparisons",
    "console",
    "corpus",
    "percentile",
    "print_table",
    "process_cpu",
    "write_result",
]

RESULTS_DIR = Path(os.environ.get("AFI_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")
# Piped output (logs, make) still gets a table wide enough for every column.
console = Console(width=None if sys.stdout.isatty() else 160)

_SYLLABLE_TEXT = "ka lo mi ne ru sa ti vo be da fe gi ho ju ke la mo nu pi qu re so tu va we xi yo ze"
_SYLLABLES = _SYLLABLE_TEXT.split()
VOCABULARY_SIZE = 20_000


def _vocabulary() -> tuple[list[str], list[float]]:
    """Return a fixed vocabulary of pseudo-words and Zipf weights (s = 1.1), as content words are."""
    rng = random.Random(0)
    words: dict[str, None] = {}
    while len(words) < VOCABULARY_SIZE:
        words["".join(rng.choices(_SYLLABLES, k=rng.randint(2, 4)))] = None
    return list(words), [1.0 / (rank**1.1) for rank in range(1, VOCABULARY_SIZE + 1)]


_WORDS, _WEIGHTS = _vocabulary()
# cumulative once: ``choices`` given bare weights sums all 20,000 of them on every call (the same draws)
_CUM_WEIGHTS = list(itertools.accumulate(_WEIGHTS))


def corpus(n: int, *, seed: int, prefix: str = "") -> list[str]:
    """Given a count and a seed, return n distinct pseudo-sentences: 8-16 Zipf-drawn words and a number."""
    rng = random.Random(seed)
    return [
        f"{prefix}{' '.join(rng.choices(_WORDS, cum_weights=_CUM_WEIGHTS, k=rng.randint(8, 16)))} #{seed}-{i}"
        for i in range(n)
    ]


def percentile(values: Sequence[float], q: float) -> float:
    """Given samples and q in [0, 100], return the nearest-rank percentile."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[rank]


def process_cpu(pid: int) -> float:
    """Given a process id, return the CPU seconds its threads have used (utime + stime, ``/proc``).

    The kernel counts them in clock ticks (10 ms at the usual 100 Hz): finer figures are means.
    """
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def print_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print rows under columns as a rich table."""
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="right" if column != columns[0] else "left")
    for row in rows:
        table.add_row(*(f"{cell:.2f}" if isinstance(cell, float) else str(cell) for cell in row))
    console.print(table)


def comparison(
    metric: str, unit: str, better: str, *, ours: tuple[str, float | None], baseline: tuple[str, float | None]
) -> dict[str, Any] | None:
    """Given what was measured, its unit, which way is better (``higher`` or ``lower``) and the two sides
    as (label, value), return one entry of a result's ``comparisons``; None when a side has no figure
    (a baseline that could not run), so callers can list every pair and drop the missing ones.
    """
    if better not in ("higher", "lower"):
        raise ValueError(f"better must be 'higher' or 'lower', not {better!r}")
    entry: dict[str, Any] = {"metric": metric, "unit": unit, "better": better}
    for side, (label, value) in (("ours", ours), ("baseline", baseline)):
        if value is None or not math.isfinite(value) or value < 0:
            return None
        entry[side] = {"label": label, "value": round(float(value), 4)}
    return entry


def comparisons(*entries: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Given entries from ``comparison``, return those with both figures, in order."""
    return [entry for entry in entries if entry is not None]


def write_result(name: str, payload: dict[str, Any], results_dir: Path | None = None) -> Path:
    """Write a benchmark's figures to ``<results_dir>/<name>.json`` (default ``RESULTS_DIR``); return the path."""
    directory = RESULTS_DIR if results_dir is None else results_dir
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path
