"""``python -m bench._plots``: one PNG per results file stating comparisons, ours beside the baseline.

matplotlib comes with the ``bench`` extra (``make bench`` installs it, ``make test`` does not): without
it these tests are skipped, saying so.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench._common import comparison, comparisons

pytest.importorskip("matplotlib", reason="matplotlib is in the bench extra: pip install -e '.[bench]'")

REPO = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _write(folder: Path, name: str, payload: dict[str, Any]) -> None:
    (folder / f"{name}.json").write_text(json.dumps(payload))


def _plots(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench._plots", str(folder)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _pixels_of(path: Path, colour: str) -> int:
    """How many pixels of the PNG have exactly this colour (``#rrggbb``)."""
    from matplotlib.image import imread

    image = imread(path)[:, :, :3]
    wanted = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    close = abs(image - wanted).max(axis=2) < 1 / 255
    return int(close.sum())


@pytest.fixture
def results(tmp_path: Path) -> Path:
    _write(
        tmp_path,
        "remember",
        {
            "results": [],
            "comparisons": comparisons(
                comparison(
                    "remember with consolidation, 10,000 notes",
                    "notes/s",
                    "higher",
                    ours=("afi-memory", 882.0),
                    baseline=("AgentFS SDK (files/s)", 229.0),
                ),
                comparison(
                    "a baseline that did not run", "notes/s", "higher", ours=("afi-memory", 1.0), baseline=("x", None)
                ),
            ),
        },
    )
    _write(
        tmp_path,
        "ledger",
        {
            "comparisons": comparisons(
                comparison("append", "entries/s", "higher", ours=("ledger", 35600.0), baseline=("bare", 61000.0)),
                comparison("search p50", "ms", "lower", ours=("search_conversation", 3.5), baseline=("scan", 565.0)),
                comparison("LoCoMo recall@10", "% of evidence", "higher", ours=("ours", 56.2), baseline=("BM25", 55.6)),
            )
        },
    )
    _write(tmp_path, "older", {"results": [{"remember_notes_per_s": 500.0}]})  # a run from before comparisons
    (tmp_path / "broken.json").write_text("{not json")
    return tmp_path


def test_each_result_with_comparisons_is_drawn_as_a_png(results: Path) -> None:
    done = _plots(results)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in results.glob("*.png")) == ["ledger.png", "remember.png"]
    from bench._plots import BASE_COLOUR, OURS_COLOUR

    sizes = {}
    for name in ("remember", "ledger"):
        png = results / f"{name}.png"
        assert png.stat().st_size > 10_000, f"{name}.png is too small to hold a chart"
        sizes[name] = _png_size(png)
        assert 900 <= sizes[name][0] <= 1400, "about README width"
        assert _pixels_of(png, OURS_COLOUR) > 1000 and _pixels_of(png, BASE_COLOUR) > 1000, "both bars are drawn"
    assert sizes["ledger"][1] > sizes["remember"][1], "three metrics in three units take more room than one"
    assert "drew" in done.stdout and "remember.png" in done.stdout


def test_a_result_without_comparisons_is_skipped_with_a_line_saying_so(results: Path) -> None:
    done = _plots(results)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert any(line.startswith("skipped older.json: no comparisons") for line in lines), done.stdout
    assert any(line.startswith("skipped broken.json: not readable JSON") for line in lines), done.stdout
    assert not (results / "older.png").exists() and not (results / "broken.png").exists()


def test_a_missing_folder_is_refused_with_a_message(tmp_path: Path) -> None:
    done = _plots(tmp_path / "nowhere")
    assert done.returncode == 2
    assert "no results folder" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("ours", "baseline", "better", "text"),
    [
        pytest.param(882.0, 229.0, "higher", "3.85× higher (better)", id="more-throughput"),
        pytest.param(1.4, 745.0, "lower", "532× lower (better)", id="much-faster"),
        pytest.param(1.83, 1.30, "lower", "1.41× higher (worse)", id="slower"),
        pytest.param(55.6, 55.6, "higher", "1.00×, even", id="even"),
        pytest.param(0.0, 3.0, "higher", "no ratio (a zero)", id="zero"),
    ],
)
def test_the_ratio_says_which_way_and_whether_that_is_better(
    ours: float, baseline: float, better: str, text: str
) -> None:
    from bench._plots import ratio_text

    entry = comparison("m", "u", better, ours=("a", ours), baseline=("b", baseline))
    assert entry is not None
    assert ratio_text(entry) == text
