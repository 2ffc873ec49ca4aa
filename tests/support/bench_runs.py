"""Running the benches as a user does, from the repository, with their results sent to a test's folder.

No timing is asserted by the tests that use these: only that the figures exist, are positive and
consistent, and that the comparisons each bench states (what ``make bench`` draws) are the figures it
measured, ours beside its baseline.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def bench(module: str, out: Path, *args: str) -> dict[str, Any]:
    done = run_module([f"bench.{module}", *args, "--results-dir", str(out)], out)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads((out / f"{module}.json").read_text())
    return result


def run_module(args: list[str], out: Path) -> subprocess.CompletedProcess[str]:
    """Run ``python -m ARGS`` from the repository with its results sent to ``out``."""
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        env={**os.environ, "AFI_BENCH_RESULTS": str(out)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def quick(name: str, out: Path, *args: str) -> dict[str, Any]:
    """Run ``python -m bench NAME --quick [ARGS]`` with its results sent to ``out``; return its JSON."""
    done = run_module(["bench", name, "--quick", *args], out)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads((out / f"{name}.json").read_text())
    return result


def positive(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def compared(result: dict[str, Any], count: int) -> list[tuple[float, float]]:
    """Check the result's comparisons are well formed and ``count`` of them; return (ours, baseline) each."""
    entries = result["comparisons"]
    assert len(entries) == count, [e["metric"] for e in entries]
    for entry in entries:
        assert set(entry) == {"metric", "unit", "better", "ours", "baseline"}
        assert entry["metric"] and entry["unit"] and entry["better"] in ("higher", "lower")
        for side in ("ours", "baseline"):
            assert entry[side]["label"] and math.isfinite(entry[side]["value"]) and entry[side]["value"] >= 0
    assert len({e["metric"] for e in entries}) == count, "every metric is named apart"
    return [(e["ours"]["value"], e["baseline"]["value"]) for e in entries]


def same(pair: tuple[float, float], ours: float, baseline: float, *, rounded: float = 1e-4) -> bool:
    """Whether a comparison holds these figures (up to its rounding, or the figures' own)."""
    return bool(pair[0] == pytest.approx(ours, rel=1e-3, abs=rounded)) and bool(
        pair[1] == pytest.approx(baseline, rel=1e-3, abs=rounded)
    )
