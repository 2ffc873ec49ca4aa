"""Draw each benchmark beside its baseline: one PNG per results file that states its comparisons.

``python -m bench._plots [DIR]`` (``make bench`` runs it after the benchmarks) reads every
``DIR/*.json`` (default ``bench/results``) holding a ``comparisons`` list, as ``bench/_common.py``'s
``comparison`` writes it, and draws ``DIR/<name>.png``: per metric a pair of horizontal bars, ours
beside the baseline, each with its figure and ours with the ratio. Metrics that share a unit and a
direction share a panel, whose axis label says both. A results file without comparisons (written
before they existed, or by a run whose baseline could not run) is skipped with a line saying so.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from ._common import RESULTS_DIR

__all__ = ["draw", "plot_all", "ratio_text"]

OURS_COLOUR, BASE_COLOUR = "#2f6db5", "#a3acb9"
BETTER_COLOUR, WORSE_COLOUR = "#1d7a3a", "#b5462f"
WIDTH_IN, DPI = 9.0, 120  # about 1,080 px wide: sharp at README width
ROW_IN = 0.26  # one bar, or one metric's heading
LOG_SPREAD = 50.0  # a panel whose values span more than this is drawn on a log scale
ROOM = 0.62  # the longest bar ends here (a fraction of the panel), leaving room for its text
INSIDE = 0.34  # a bar reaching this far across holds its ratio
DIGIT_PT = 5.8  # a digit's width at 9 pt


def _number(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def ratio_text(entry: dict[str, Any]) -> str:
    """Given one comparison, return how ours stands to the baseline, e.g. ``3.86× higher (better)``."""
    ours, base = entry["ours"]["value"], entry["baseline"]["value"]
    if ours <= 0 or base <= 0:
        return "no ratio (a zero)"
    ratio = ours / base
    if abs(ratio - 1) < 0.005:
        return "1.00×, even"
    higher = ratio > 1
    multiple = ratio if higher else 1 / ratio
    shown = f"{multiple:.2f}" if multiple < 10 else f"{multiple:.1f}" if multiple < 100 else f"{multiple:,.0f}"
    good = higher == (entry["better"] == "higher")
    return f"{shown}× {'higher' if higher else 'lower'} ({'better' if good else 'worse'})"


def _is_better(entry: dict[str, Any]) -> bool:
    ours, base = entry["ours"]["value"], entry["baseline"]["value"]
    return bool(ours >= base if entry["better"] == "higher" else ours <= base)


def _groups(entries: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Given comparisons, return them grouped by (unit, better), in the order each group first appears."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for entry in entries:
        groups.setdefault((entry["unit"], entry["better"]), []).append(entry)
    return list(groups.values())


def _rows(group: Sequence[dict[str, Any]]) -> float:
    return len(group) * 3 + (len(group) - 1) * 0.5  # a heading and two bars per metric, a gap between


def _ratio(ax: Axes, entry: dict[str, Any], y: float, left: float, log: bool) -> None:
    """Write the ratio on ours's bar: inside it when the bar is long enough, else after its figure."""
    value = max(entry["ours"]["value"], left)
    low, high = ax.get_xlim()
    reach = math.log(value / low) / math.log(high / low) if log else value / high
    text = ratio_text(entry)
    if reach >= INSIDE:
        ax.annotate(text, (value, y), xytext=(-5, 0), textcoords="offset points", ha="right", va="center",
                    fontsize=9, fontweight="bold", color="white")  # fmt: skip
        return
    after = 14 + DIGIT_PT * len(_number(entry["ours"]["value"]))  # past the figure written after the bar
    colour = BETTER_COLOUR if _is_better(entry) else WORSE_COLOUR
    ax.annotate(text, (value, y), xytext=(after, 0), textcoords="offset points", va="center", fontsize=9,
                fontweight="bold", color=colour)  # fmt: skip


def _panel(ax: Axes, group: Sequence[dict[str, Any]]) -> None:
    values = [e[side]["value"] for e in group for side in ("ours", "baseline")]
    positive = [v for v in values if v > 0] or [1.0]
    top = max(positive)
    log = top / min(positive) > LOG_SPREAD
    if log:
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())
        left = min(positive) / 2
        ax.set_xlim(left, left * (top / left) ** (1 / ROOM))
    else:
        left = 0.0
        ax.set_xlim(0, top / ROOM)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1000 or v == int(v) else f"{v:g}"))
    ticks, labels = [], []
    y = 0.0
    heading = ax.get_yaxis_transform()  # x in axes fractions, y in data
    for entry in group:
        ax.text(0.005, y, entry["metric"], transform=heading, va="center", fontsize=10, fontweight="bold")
        for offset, side, colour in ((1, "ours", OURS_COLOUR), (2, "baseline", BASE_COLOUR)):
            value = entry[side]["value"]
            ax.barh(y + offset, max(value - left, 0.0), left=left, height=0.8, color=colour)
            ticks.append(y + offset)
            labels.append(entry[side]["label"])
            ax.annotate(
                _number(value),
                (max(value, left), y + offset),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize=9,
            )
        _ratio(ax, entry, y + 1, left, log)
        y += 3.5
    ax.set_yticks(ticks, labels, fontsize=9)
    ax.set_ylim(y - 0.5 - 0.5, -0.6)  # the first heading at the top
    ax.tick_params(axis="y", length=0)
    unit, better = group[0]["unit"], group[0]["better"]
    ax.set_xlabel(f"{unit}, {better} is better" + (" (log scale)" if log else ""), fontsize=10)
    ax.grid(axis="x", color="#e2e6ea", linewidth=0.8)
    ax.set_axisbelow(True)
    for spine in ("top", "right", "left"):
        ax.spines[spine].set_visible(False)


def draw(name: str, entries: Sequence[dict[str, Any]], out: Path, *, note: str = "") -> Path:
    """Given a benchmark's name and its comparisons, draw them into the PNG ``out``; return it."""
    groups = _groups(entries)
    heights = [_rows(g) * ROW_IN + 0.55 for g in groups]  # the axis and its label below each panel
    # The Agg canvas, no pyplot: no display and no global figure state.
    figure = Figure(figsize=(WIDTH_IN, sum(heights) + 0.7), dpi=DPI, layout="constrained")
    axes = figure.subplots(len(groups), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
    for ax, group in zip(axes, groups, strict=True):
        _panel(ax, group)
    figure.suptitle(f"{name}: afi-memory (blue) beside its baseline (grey), same run", fontsize=12, x=0.01, ha="left")
    if note:
        figure.text(0.99, 0.005, note, ha="right", va="bottom", fontsize=7.5, color="#6b7280")
    FigureCanvasAgg(figure)  # the figure draws on Agg from here on
    figure.savefig(out)
    return out


def _comparisons(path: Path) -> list[dict[str, Any]] | str:
    """Given a results file, return its comparisons, or why it has none to draw."""
    try:
        payload = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return f"not readable JSON ({exc})"
    entries = payload.get("comparisons") if isinstance(payload, dict) else None
    if not isinstance(entries, list):
        return "no comparisons (written before results stated them)"
    if not entries:
        return "no comparisons (no baseline could run)"
    for entry in entries:
        ok = isinstance(entry, dict) and entry.get("better") in ("higher", "lower")
        ok = ok and all(isinstance(entry.get(s), dict) for s in ("ours", "baseline"))
        if not ok or not all(_finite(entry[s].get("value")) for s in ("ours", "baseline")):
            return f"a comparison is malformed: {entry!r}"
    return entries


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value >= 0


def plot_all(results_dir: Path = RESULTS_DIR) -> list[Path]:
    """Given a results folder, draw ``<name>.png`` for each ``<name>.json`` stating comparisons; print a
    line for each file skipped; return the PNGs written."""
    written = []
    for path in sorted(results_dir.glob("*.json")):
        entries = _comparisons(path)
        if isinstance(entries, str):
            print(f"skipped {path.name}: {entries}")
            continue
        measured = datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M UTC")
        png = draw(path.stem, entries, path.with_suffix(".png"), note=f"{path.name}, {measured}")
        print(f"drew {png}")
        written.append(png)
    return written


def main(argv: Sequence[str]) -> int:
    """Given ``[DIR]``, draw every results file there; return the exit code."""
    if len(argv) > 1 or any(a.startswith("-") for a in argv):
        print("usage: python -m bench._plots [RESULTS_DIR]", file=sys.stderr)
        return 2
    folder = Path(argv[0]) if argv else RESULTS_DIR
    if not folder.is_dir():
        print(f"no results folder at {folder}: run python -m bench first", file=sys.stderr)
        return 2
    plot_all(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
