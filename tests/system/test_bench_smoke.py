"""The benches, run for real at a tiny size: their JSON has every figure, and sane ones.

Each bench runs as a user runs it (``python -m bench.<name>``, or ``python -m bench <name> --quick``,
from the repository root) and writes its result file into a temporary directory. No timing is
asserted: only that the figures exist, are positive and consistent, that every side found the same
files, that every body read back intact, and that the comparisons each states (what ``make bench``
draws) are the figures it measured, ours beside its baseline.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.locomo import DEFAULT_DATA

REPO = Path(__file__).resolve().parents[2]
NOTES = 200
SELECTIVE_EVERY, SELECTIVE_AT = 200, 17  # as planted by bench/search.py
BROAD_EVERY, BROAD_AT = 12, 5
FILES = 40
ROUNDS = 2
LOAD_NOTES = 300
LOAD_SECONDS = 2
MIX_KINDS = ("read", "stat", "list", "exact", "regex", "semantic")  # bench/_load_traffic.py's MIX


def _bench(module: str, out: Path, *args: str) -> dict[str, Any]:
    done = _run_module([f"bench.{module}", *args, "--results-dir", str(out)], out)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads((out / f"{module}.json").read_text())
    return result


def _run_module(args: list[str], out: Path) -> subprocess.CompletedProcess[str]:
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


def _quick(name: str, out: Path) -> dict[str, Any]:
    """Run ``python -m bench NAME --quick`` with its results sent to ``out``; return its JSON."""
    done = _run_module(["bench", name, "--quick"], out)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads((out / f"{name}.json").read_text())
    return result


def _positive(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _compared(result: dict[str, Any], count: int) -> list[tuple[float, float]]:
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


def _same(pair: tuple[float, float], ours: float, baseline: float, *, rounded: float = 1e-4) -> bool:
    """Whether a comparison holds these figures (up to its rounding, or the figures' own)."""
    return bool(pair[0] == pytest.approx(ours, rel=1e-3, abs=rounded)) and bool(
        pair[1] == pytest.approx(baseline, rel=1e-3, abs=rounded)
    )


@pytest.fixture(scope="module")
def search_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if shutil.which("rg") is None:
        pytest.skip("ripgrep (rg) is not installed")
    return _bench("search", tmp_path_factory.mktemp("search"), "--sizes", str(NOTES), "--runs", "3")


@pytest.fixture(scope="module")
def http_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _bench("http_read", tmp_path_factory.mktemp("http"), "--files", str(FILES), "--rounds", str(ROUNDS))


@pytest.fixture(scope="module")
def load_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("load")
    return _bench("load", out, "--notes", str(LOAD_NOTES), "--seconds", str(LOAD_SECONDS), "--warmup", "0.5")


def test_search_result_has_one_size_with_every_case(search_result: dict[str, Any]) -> None:
    assert search_result["bench"] == "search"
    (size,) = search_result["sizes"]
    assert size["notes"] == NOTES
    assert size["files"] == NOTES  # /facts/<name>.md per note (a walk of / leaves /history out)
    assert size["build_seconds"] > 0 and size["db_bytes"] > 0
    assert [c["name"] for c in size["cases"]] == ["selective-exact", "selective-regex", "broad-exact", "broad-regex"]
    assert set(size["goals_met"]) == {
        "selective_first_page_10x",
        "selective_first_page_p50_10ms",
        "broad_all_pages_not_slower",
        "all_agree",
    }


def test_search_compares_each_case_with_the_faster_tool(search_result: dict[str, Any]) -> None:
    pairs = _compared(search_result, 4)
    for pair, case in zip(pairs, search_result["sizes"][0]["cases"], strict=True):
        ours = case["provider_first_page_ms" if case["name"].startswith("selective") else "provider_all_pages_ms"]
        assert _same(pair, ours["p50"], min(case["rg_ms"]["p50"], case["grep_ms"]["p50"])), case["name"]
    assert all(e["unit"] == "ms" and e["better"] == "lower" for e in search_result["comparisons"])


@pytest.mark.parametrize("index", range(4), ids=["selective-exact", "selective-regex", "broad-exact", "broad-regex"])
def test_search_case_figures_are_consistent(search_result: dict[str, Any], index: int) -> None:
    case = search_result["sizes"][0]["cases"][index]
    if case["name"].startswith("selective"):
        planted = sum(1 for i in range(NOTES) if i % SELECTIVE_EVERY == SELECTIVE_AT)
    else:
        planted = sum(1 for i in range(NOTES) if i % BROAD_EVERY == BROAD_AT)
    assert case["agree"] is True, "provider, rg and grep must find the same files"
    assert case["matching_notes"] == planted
    assert case["matching_files"] == planted
    assert case["match_fraction"] == pytest.approx(planted / NOTES)
    every = case["provider_all_pages_ms"]
    assert every["matches"] >= case["matching_files"]
    assert case["first_page_matches"] == min(100, every["matches"])
    assert every["pages"] == max(1, math.ceil(every["matches"] / every["limit"]))
    for key in ("provider_first_page_ms", "provider_all_pages_ms", "rg_ms", "grep_ms"):
        stats = case[key]
        assert _positive(stats["p50"]) and stats["p95"] >= stats["p50"], key
    assert case["provider_first_page_ms"]["runs"] == 3
    best = min(case["rg_ms"]["p50"], case["grep_ms"]["p50"])
    assert case["first_page_speedup"] == pytest.approx(best / case["provider_first_page_ms"]["p50"])
    assert _positive(case["all_pages_speedup"])
    assert case["best_tool"] in ("rg", "grep")


def test_search_refuses_a_bad_size(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.search", "--sizes", "ten", "--results-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert not (tmp_path / "search.json").exists()


def test_http_read_figures_are_consistent(http_result: dict[str, Any]) -> None:
    assert http_result["bench"] == "http_read"
    assert http_result["files"] == FILES
    assert FILES * 1024 <= http_result["bytes_total"] <= FILES * 4096
    assert http_result["mismatches"] == 0, "every body must equal the bytes written"
    for key in ("afi_files_per_s", "static_files_per_s"):
        rates = http_result[key]
        assert len(rates["all"]) == ROUNDS
        assert all(_positive(r) for r in rates["all"])
        assert rates["min"] <= rates["median"] <= rates["max"]
    ratio = http_result["afi_files_per_s"]["median"] / http_result["static_files_per_s"]["median"]
    assert http_result["ratio"] == pytest.approx(ratio)
    assert http_result["goal_met"] == (ratio >= http_result["goal_ratio"])
    cpu = http_result["server_cpu_us_per_read"]
    assert set(cpu) == {"afi", "static"} and min(cpu.values()) >= 0 and sum(cpu.values()) > 0
    (pair,) = _compared(http_result, 1)
    assert _same(pair, http_result["afi_files_per_s"]["median"], http_result["static_files_per_s"]["median"])
    assert http_result["comparisons"][0]["better"] == "higher"


def test_load_figures_are_consistent(load_result: dict[str, Any]) -> None:
    assert load_result["bench"] == "load"
    assert load_result["notes"] == LOAD_NOTES and load_result["clients"] == 8 and load_result["writers"] == 1
    names = sorted(load_result["configs"], key=lambda name: name != "1 process")  # the baseline first
    if load_result["workers_option_available"]:  # the side by side, when afi serve has --workers
        assert names == ["1 process", f"--workers {load_result['workers_requested']}"]
    else:
        assert names == ["1 process"]
    for name in names:
        config = load_result["configs"][name]
        assert set(config["phases"]) == {"read", "write"}
        for phase, figures in config["phases"].items():
            assert figures["errors"] == 0, (name, phase, figures["error_examples"])
            assert figures["lost_writes"] == 0
            assert figures["requests"] > 0 and _positive(figures["req_per_s"])
            assert figures["req_per_s"] == pytest.approx(figures["requests"] / figures["seconds"])
            assert _positive(figures["server_cpu_ms_per_request"])
            latency = figures["latency_ms"]
            assert 0 < latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["max"]
            assert set(figures["by_kind"]) <= {"read", "stat", "list", "exact", "regex", "semantic", "write",
                                               "counter-read"}  # fmt: skip
            assert sum(k["count"] for k in figures["by_kind"].values()) == figures["requests"]
            assert figures["semantic_p50_ms"] == figures["by_kind"]["semantic"]["p50"]
            assert set(figures["goals_met"]) == {
                "req_per_s_vs_floor", "p99_vs_floor", "semantic_p50_vs_floor", "errors", "lost_writes"
            }  # fmt: skip
            assert set(figures["absolute_goals_met"]) == {"req_per_s", "p99_ms", "semantic_p50_ms"}
        write = config["phases"]["write"]
        assert write["writes_acked"] > 0 and write["by_kind"]["write"]["count"] == write["writes_acked"]
        before, after = write["counters_before"], write["counters_after"]
        grown = sum(after[path] - before[path] for path in after)
        assert grown == write["writes_acked"], "every acknowledged increment is stored, and no other"
        for moment, resources in config["resources"].items():
            assert resources["processes"] >= 1 and resources["rss_mb"] > 0 and resources["fds"] > 0, moment
        assert sum(config["resources"]["during_read"]["connections_by_process"]) == 8
        assert sum(config["resources"]["during_write"]["connections_by_process"]) == 9
    if len(names) > 1:
        assert load_result["configs"][names[1]]["resources"]["idle"]["processes"] > 2  # a supervisor and its workers


def test_load_measures_each_server_beside_its_floor(load_result: dict[str, Any]) -> None:
    """Each configuration's floor (a bare Starlette app served the same way) answered the same mix of
    requests from the same clients, with as many processes as afi serve had; its ratios and goals are
    the figures measured."""
    goals = load_result["goals"]
    assert goals["req_per_s_vs_floor"] > 0 and goals["p99_vs_floor"] > 0 and goals["semantic_p50_vs_floor"] > 0
    assert load_result["goals_basis"]
    for name, config in load_result["configs"].items():
        floor = config["floor"]
        assert floor["errors"] == 0, (name, floor["error_examples"])
        assert floor["writers"] == 0 and floor["clients"] == load_result["clients"]
        assert floor["requests"] > 0 and floor["req_per_s"] == pytest.approx(floor["requests"] / floor["seconds"])
        assert set(floor["by_kind"]) == set(MIX_KINDS), "the floor is sent every kind of request of the mix"
        assert sum(k["count"] for k in floor["by_kind"].values()) == floor["requests"]
        latency = floor["latency_ms"]
        assert 0 < latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["max"]
        assert sum(floor["resources"]["during"]["connections_by_process"]) == load_result["clients"]
        assert floor["resources"]["after"]["processes"] == config["resources"]["idle"]["processes"]
        assert set(config["vs_floor"]) == {"read", "write"}
        for phase, ratios in config["vs_floor"].items():
            figures = config["phases"][phase]
            assert ratios["req_per_s"] == pytest.approx(figures["req_per_s"] / floor["req_per_s"])
            assert ratios["p99_ms"] == pytest.approx(figures["latency_ms"]["p99"] / latency["p99"])
            assert ratios["semantic_p50_ms"] == pytest.approx(figures["semantic_p50_ms"] / floor["semantic_p50_ms"])
            cpu = figures["server_cpu_ms_per_request"], floor["server_cpu_ms_per_request"]
            assert ratios["server_cpu_per_request"] == pytest.approx(cpu[0] / cpu[1])
            met = figures["goals_met"]
            assert met["req_per_s_vs_floor"] == (ratios["req_per_s"] >= goals["req_per_s_vs_floor"])
            assert met["p99_vs_floor"] == (ratios["p99_ms"] <= goals["p99_vs_floor"])
            assert met["semantic_p50_vs_floor"] == (ratios["semantic_p50_ms"] <= goals["semantic_p50_vs_floor"])


def test_load_compares_each_server_with_its_floor_then_workers_with_one_process(load_result: dict[str, Any]) -> None:
    configs = load_result["configs"]
    with_workers = len(configs) > 1
    pairs = _compared(load_result, 3 * len(configs) + (7 if with_workers else 0))
    in_run_order = sorted(configs, key=lambda name: name != "1 process")  # the file's keys are sorted
    for index, config in enumerate(configs[name] for name in in_run_order):  # each beside its floor first
        read, floor = config["phases"]["read"], config["floor"]
        first = 3 * index
        assert _same(pairs[first], read["req_per_s"], floor["req_per_s"])
        assert _same(pairs[first + 1], read["latency_ms"]["p99"], floor["latency_ms"]["p99"])
        assert _same(pairs[first + 2], read["semantic_p50_ms"], floor["semantic_p50_ms"])
        assert "floor" in load_result["comparisons"][first]["baseline"]["label"]
    if not with_workers:  # nothing more to compare without --workers
        return
    ours, base = configs[f"--workers {load_result['workers_requested']}"], configs["1 process"]
    rest = pairs[3 * len(configs) :]
    assert _same(rest[0], ours["phases"]["read"]["req_per_s"], base["phases"]["read"]["req_per_s"])
    assert _same(rest[4], ours["phases"]["write"]["latency_ms"]["p99"], base["phases"]["write"]["latency_ms"]["p99"])
    pss = ours["resources"]["after_write"]["pss_mb"], base["resources"]["after_write"]["pss_mb"]
    assert _same(rest[6], *pss)


def _expected(name: str, result: dict[str, Any]) -> tuple[int, float, float]:
    """How many comparisons a quick run states, and its first pair as read from its own figures."""
    if name == "ssh":
        grep = result["open_grep_ms"]
        return 2, grep["ssh_grep"], grep["http_grep"]
    if name == "ledger":
        appends = result["appends"]
        return 2 + 3, appends["per_second"], appends["baseline_per_second"]
    if name == "recall":
        return 2, result["fabric"]["p50_ms"], result["bm25_baseline"]["p50_ms"]
    if name == "remember":
        first = result["results"][0]
        return 2, first["remember_notes_per_s"], first["agentfs_files_per_s"]
    if name == "fold":
        vectors, words, hnsw = result["modes"]
        assert vectors["edited_copies_found"] == words["edited_copies_found"] == result["edited_copies"]
        assert hnsw["fold"] == "postgresql: HNSW" and 0 < hnsw["edited_copies_found"] <= result["edited_copies"]
        return 4, words["fold_search_p50_ms"], vectors["fold_search_p50_ms"]
    if name == "workspace_bytes":  # the table's figures, rounded to 0.01 ms
        first = result["rows"][0]
        return 8, first["row write ms"], first["file write ms"]
    assert name == "locomo"
    runs = result["results"]
    pg = "fabric default (hash + bm25) on PostgreSQL" in runs
    semantic = "fabric semantic (minilm + bm25)" in runs
    return (
        3 * (1 + pg + semantic),
        runs["fabric default (hash + bm25)"]["recall@1"],
        runs["bm25 only (baseline)"]["recall@1"],
    )


@pytest.mark.parametrize("name", ["ssh", "ledger", "recall", "remember", "locomo", "workspace_bytes", "fold"])
def test_a_quick_run_states_its_comparisons(name: str, tmp_path: Path) -> None:
    if name == "remember" and importlib.util.find_spec("agentfs_sdk") is None:
        pytest.skip("remember's baseline is the AgentFS SDK, in the bench extra: pip install -e '.[bench]'")
    if name in ("ledger", "locomo") and not DEFAULT_DATA.exists():
        pytest.skip(f"LoCoMo data not found at {DEFAULT_DATA}")
    result = _quick(name, tmp_path)
    count, ours, baseline = _expected(name, result)
    pairs = _compared(result, count)
    assert _same(pairs[0], ours, baseline, rounded=0.006 if name == "workspace_bytes" else 1e-4)


def _engines(tmp_path: Path, store: Path, notes: int) -> subprocess.CompletedProcess[str]:
    return _run_module(["bench.engines", "--quick", "--notes", str(notes), "--store", str(store)], tmp_path)


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
    assert _positive(first["load"]["sqlite_remember_load_per_s"])
    assert _notes_in(store) == 300 and not list(tmp_path.glob("*.building"))
    reused = _engines(tmp_path, store, 300)
    assert reused.returncode == 0, reused.stderr[-3000:]
    second = json.loads((tmp_path / "engines.json").read_text())
    assert second["load"]["sqlite_remember_load_per_s"] is None
    assert _notes_in(store) == 300  # the run remembered into its copy, not into the kept store
    assert len(first["comparisons"]) == len(second["comparisons"]) + 1  # no bulk-load baseline the second time
    assert all(_positive(row["remember_per_s"]) for row in second["engines"])
    refused = _engines(tmp_path, store, 299)
    assert refused.returncode != 0 and "holds 300 notes, not 299" in refused.stderr


def test_folders_figures_are_consistent(tmp_path: Path) -> None:
    result = _bench("folders", tmp_path, "--files", "3000")
    assert result["bench"] == "folders" and result["files"] == 3000 and result["grep_files"] == 0
    assert (result["list_100"]["pages"], result["list_1000"]["pages"]) == (30, 3)
    for key in ("list_100", "list_1000", "search_first", "search_again"):
        figures = result[key]
        assert figures["pages"] >= 1 and 0 < figures["p50_ms"] <= figures["max_ms"], (key, figures)
    pairs = _compared(result, 3)
    assert _same(pairs[0], result["list_100"]["p50_ms"], result["scandir_ms"])
    assert _same(pairs[1], result["list_1000"]["p50_ms"], result["scandir_ms"])
    assert _same(pairs[2], result["search_first"]["first_ms"], result["grep_ms"])


def test_web_render_figures_are_consistent(tmp_path: Path) -> None:
    result = _quick("web_render", tmp_path)
    pages = {row["page"]: row for row in result["pages"]}
    assert len(pages) == 6 and pages["README"]["rendered"] is True
    assert not any(row["rendered"] for name, row in pages.items() if name != "README"), "bombs show as text"
    assert all(row["cpu_ms"] >= 0 and row["whole_render_cpu_ms"] > 0 for row in pages.values())
    (pair,) = _compared(result, 1)
    worst = max(row["cpu_ms"] for row in pages.values())
    assert _same(pair, worst, max(row["whole_render_cpu_ms"] for row in pages.values()))


HOSTILE_FAMILIES = ["HTTP corpus", "paths not UTF-8", "loose Origins", "cross-resource tokens", "render bombs",
                    "front matter", "sparse writes", "big file", "big folder"]  # fmt: skip


def test_hostile_cpu_figures_are_consistent(tmp_path: Path) -> None:
    """Every family sent its inputs, each figure agrees with the others, and the comparisons state the
    worst request beside the 1 s goal, a plain stat and a plain write (none of them asserted small)."""
    from tests.bindings.http.test_http_not_utf8 import cases
    from tests.support.http_corpus import corpus

    result = _quick("hostile_cpu", tmp_path)
    families, baseline = result["families"], result["baseline"]
    assert result["bench"] == "hostile_cpu" and result["quick"] is True and result["server_alive_at_the_end"]
    assert sorted(families) == sorted(HOSTILE_FAMILIES)  # the file's keys are sorted
    assert families["HTTP corpus"]["requests"] == len(corpus())
    assert families["paths not UTF-8"]["requests"] == len(cases())
    assert families["sparse writes"]["requests"] == 20 and families["big file"]["requests"] == 4  # 30 MB: a page
    assert families["big folder"]["requests"] >= 5 + 1 + 1  # 5,000 files: 5 list pages, the page, a search page
    plain = ("GET /afi/stat?path=/", "PUT /afi/write of 4 KiB")
    assert sorted(baseline) == sorted(plain) and all(baseline[name]["requests"] == 200 for name in plain)
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
    pairs = _compared(result, 3)
    assert _same(pairs[0], worst, 1000)
    assert _same(pairs[1], worst, stat)
    assert result["worst_write"]["method"] == "PUT" and _same(pairs[2], result["worst_write"]["cpu_ms"], write)


def test_startup_figures_are_consistent(tmp_path: Path) -> None:
    result = _bench("startup", tmp_path, "--rounds", "1")
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
    pairs = _compared(result, len(timed))
    for pair, name in zip(pairs, timed, strict=True):
        assert _same(pair, rows[name]["median_s"], base, rounded=0.001)
