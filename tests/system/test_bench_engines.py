"""The engines, hostile-CPU and start-up benches at a tiny size: figures that agree with each other and
comparisons that state them (:mod:`tests.support.bench_runs`). No timing is asserted.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.support.bench_runs import bench, compared, positive, quick, run_module, same


def _engines(tmp_path: Path, store: Path, notes: int) -> subprocess.CompletedProcess[str]:
    return run_module(["bench.engines", "--quick", "--notes", str(notes), "--store", str(store)], tmp_path)


def _notes_in(store: Path) -> int:
    with contextlib.closing(sqlite3.connect(store)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0])


@pytest.mark.slow
def test_engines_builds_a_kept_store_once_and_measures_copies_of_it(tmp_path: Path) -> None:
    """``--store``: the first run builds the SQLite store there and says how fast; the next measures a
    copy of it (the kept store still holds its notes) and has no build rate to compare; a store of
    another size is refused, naming the count it holds."""
    store = tmp_path / "kept.db"
    built = _engines(tmp_path, store, 300)
    assert built.returncode == 0, built.stderr[-3000:]
    first = json.loads((tmp_path / "engines.json").read_text())
    assert positive(first["load"]["sqlite_remember_load_per_s"])
    assert _notes_in(store) == 300 and not list(tmp_path.glob("*.building"))
    reused = _engines(tmp_path, store, 300)
    assert reused.returncode == 0, reused.stderr[-3000:]
    second = json.loads((tmp_path / "engines.json").read_text())
    assert second["load"]["sqlite_remember_load_per_s"] is None
    assert _notes_in(store) == 300  # the run remembered into its copy, not into the kept store
    assert len(first["comparisons"]) == len(second["comparisons"]) + 1  # no bulk-load baseline the second time
    assert all(positive(row["remember_per_s"]) for row in second["engines"])
    refused = _engines(tmp_path, store, 299)
    assert refused.returncode != 0 and "holds 300 notes, not 299" in refused.stderr


HOSTILE_FAMILIES = ["HTTP corpus", "paths not UTF-8", "loose Origins", "cross-resource tokens", "render bombs",
                    "front matter", "sparse writes", "big file", "big folder"]  # fmt: skip


def test_hostile_cpu_figures_are_consistent(tmp_path: Path) -> None:
    """Every family sent its inputs, each figure agrees with the others, and the comparisons state the
    worst request beside the 1 s goal, a plain stat and a plain write (none of them asserted small)."""
    from tests.bindings.http.test_http_not_utf8 import cases
    from tests.support.http_corpus import corpus

    result = quick("hostile_cpu", tmp_path)
    families, baseline = result["families"], result["baseline"]
    assert result["bench"] == "hostile_cpu" and result["quick"] is True and result["server_alive_at_the_end"]
    assert sorted(families) == sorted(HOSTILE_FAMILIES)  # the file's keys are sorted
    assert families["HTTP corpus"]["requests"] == len(corpus())
    assert families["paths not UTF-8"]["requests"] == len(cases())
    assert families["sparse writes"]["requests"] == 20 and families["big file"]["requests"] == 4  # 30 MB: a page
    assert families["big folder"]["requests"] >= 5 + 1 + 1  # 5,000 files: 5 list pages, the page, a search page
    plain = ("GET /afi/stat?path=/", "PUT /afi/write of 4 KiB")
    assert sorted(baseline) == sorted(plain) and all(baseline[name]["requests"] == 50 for name in plain)
    for name, figures in {**families, **baseline}.items():
        cpu, statuses = figures["cpu_ms"], figures["statuses"]
        assert figures["requests"] > 0 and sum(statuses.values()) == figures["requests"], name
        assert figures["5xx"] == sum(n for code, n in statuses.items() if int(code) >= 500), name
        assert figures["no_answer"] == statuses.get("0", 0), name
        assert 0 <= cpu["p50"] <= cpu["p99"] <= cpu["max"] == figures["heaviest"][0]["cpu_ms"], name
        assert cpu["mean"] == pytest.approx(cpu["total"] / figures["requests"], abs=0.01), name
        assert (figures["over_1s_cpu"] > 0) == (cpu["max"] > 1000), name
    for key in ("requests", "5xx", "no_answer", "over_1s_cpu"):
        assert result["totals"][key] == sum(figures[key] for figures in families.values()), key
    assert result["goals_met"] == {
        "every_family_no_5xx": result["totals"]["5xx"] == 0,
        "every_family_none_over_1s_cpu": result["totals"]["over_1s_cpu"] == 0,
    }
    problems = result["problems"]
    assert all(p["status"] >= 500 or p["status"] == 0 or p["cpu_ms"] > 1000 for p in problems)
    assert len(problems) >= max(result["totals"][key] for key in ("5xx", "no_answer", "over_1s_cpu"))
    worst = max(figures["cpu_ms"]["max"] for figures in families.values())
    assert result["worst"]["cpu_ms"] == worst and result["worst"]["family"] in families
    stat, write = (baseline[name]["cpu_ms"]["mean"] for name in plain)
    pairs = compared(result, 3)
    assert same(pairs[0], worst, 1000)
    assert same(pairs[1], worst, stat)
    assert result["worst_write"]["method"] == "PUT" and same(pairs[2], result["worst_write"]["cpu_ms"], write)


def test_startup_figures_are_consistent(tmp_path: Path) -> None:
    result = bench("startup", tmp_path, "--rounds", "1")
    assert result["bench"] == "startup" and result["rounds"] == 1
    rows = {row["command"]: row for row in result["commands"]}
    quick = ["afi --version", "afi -h", "afi ls /facts", "afi cat /facts/startup.md"]
    goals = [*quick, "afi serve, to the manifest", *(["afi mount, to mounted"] if result["fuse"] else [])]
    timed = [*quick, "afi serve, to the manifest", "afi serve, to an MCP initialize", *goals[len(quick) + 1 :]]
    assert list(rows) == ["sqlite-utils --version", *timed]
    base = rows["sqlite-utils --version"]["median_s"]
    for name, row in rows.items():
        assert 0 < row["min_s"] <= row["median_s"] <= row["max_s"], name
        assert row["ratio_to_baseline"] == pytest.approx(row["median_s"] / base, rel=0.01, abs=0.01), name
        assert row["goal_met"] == (None if name not in goals else row["median_s"] <= row["goal_s"]), name
    mcp, manifest = rows["afi serve, to an MCP initialize"], rows["afi serve, to the manifest"]
    assert mcp["goal_s"] is None and mcp["min_s"] > manifest["min_s"], "MCP answers in the same launch, later"
    modules = [rows[name]["modules"] for name in quick]
    assert all(isinstance(n, int) and n > 0 for n in modules)
    assert modules[0] < min(modules[2], modules[3]), "ls and cat load the store; --version does not"
    assert result["goals_met"] == all(rows[name]["goal_met"] for name in goals)
    pairs = compared(result, len(timed))
    for pair, name in zip(pairs, timed, strict=True):
        assert same(pair, rows[name]["median_s"], base, rounded=0.001)
