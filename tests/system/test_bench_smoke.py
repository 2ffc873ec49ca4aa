"""The search, HTTP read and load benches, run for real at a tiny size: their JSON has every figure, and sane ones.

Each bench runs as a user runs it (``python -m bench.<name>`` from the repository root) and writes its
result file into a temporary directory (:mod:`tests.support.bench_runs`). No timing is asserted: only
that the figures exist, are positive and consistent, that every side found the same files, that every
body read back intact, and that the comparisons each states are the figures it measured.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.bench_runs import REPO, bench, compared, positive, same

NOTES = 200
SELECTIVE_EVERY, SELECTIVE_AT = 200, 17  # as planted by bench/search.py
BROAD_EVERY, BROAD_AT = 12, 5
FILES = 40
ROUNDS = 2
LOAD_NOTES = 300
LOAD_SECONDS = 2
MIX_KINDS = ("read", "stat", "list", "exact", "regex", "semantic")  # bench/_load_traffic.py's MIX


@pytest.fixture(scope="module")
def search_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if shutil.which("rg") is None:
        pytest.skip("ripgrep (rg) is not installed")
    return bench("search", tmp_path_factory.mktemp("search"), "--sizes", str(NOTES), "--runs", "3")


@pytest.fixture(scope="module")
def http_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return bench("http_read", tmp_path_factory.mktemp("http"), "--files", str(FILES), "--rounds", str(ROUNDS))


@pytest.fixture(scope="module")
def load_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("load")
    return bench("load", out, "--notes", str(LOAD_NOTES), "--seconds", str(LOAD_SECONDS), "--warmup", "0.5")


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
    pairs = compared(search_result, 4)
    for pair, case in zip(pairs, search_result["sizes"][0]["cases"], strict=True):
        ours = case["provider_first_page_ms" if case["name"].startswith("selective") else "provider_all_pages_ms"]
        assert same(pair, ours["p50"], min(case["rg_ms"]["p50"], case["grep_ms"]["p50"])), case["name"]
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
        assert positive(stats["p50"]) and stats["p95"] >= stats["p50"], key
    assert case["provider_first_page_ms"]["runs"] == 3
    best = min(case["rg_ms"]["p50"], case["grep_ms"]["p50"])
    assert case["first_page_speedup"] == pytest.approx(best / case["provider_first_page_ms"]["p50"])
    assert positive(case["all_pages_speedup"])
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
        assert all(positive(r) for r in rates["all"])
        assert rates["min"] <= rates["median"] <= rates["max"]
    ratio = http_result["afi_files_per_s"]["median"] / http_result["static_files_per_s"]["median"]
    assert http_result["ratio"] == pytest.approx(ratio)
    assert http_result["goal_met"] == (ratio >= http_result["goal_ratio"])
    cpu = http_result["server_cpu_us_per_read"]
    assert set(cpu) == {"afi", "static"} and min(cpu.values()) >= 0 and sum(cpu.values()) > 0
    (pair,) = compared(http_result, 1)
    assert same(pair, http_result["afi_files_per_s"]["median"], http_result["static_files_per_s"]["median"])
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
            assert figures["requests"] > 0 and positive(figures["req_per_s"])
            assert figures["req_per_s"] == pytest.approx(figures["requests"] / figures["seconds"])
            assert positive(figures["server_cpu_ms_per_request"])
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
    pairs = compared(load_result, 3 * len(configs) + (7 if with_workers else 0))
    in_run_order = sorted(configs, key=lambda name: name != "1 process")  # the file's keys are sorted
    for index, config in enumerate(configs[name] for name in in_run_order):  # each beside its floor first
        read, floor = config["phases"]["read"], config["floor"]
        first = 3 * index
        assert same(pairs[first], read["req_per_s"], floor["req_per_s"])
        assert same(pairs[first + 1], read["latency_ms"]["p99"], floor["latency_ms"]["p99"])
        assert same(pairs[first + 2], read["semantic_p50_ms"], floor["semantic_p50_ms"])
        assert "floor" in load_result["comparisons"][first]["baseline"]["label"]
    if not with_workers:  # nothing more to compare without --workers
        return
    ours, base = configs[f"--workers {load_result['workers_requested']}"], configs["1 process"]
    rest = pairs[3 * len(configs) :]
    assert same(rest[0], ours["phases"]["read"]["req_per_s"], base["phases"]["read"]["req_per_s"])
    assert same(rest[4], ours["phases"]["write"]["latency_ms"]["p99"], base["phases"]["write"]["latency_ms"]["p99"])
    pss = ours["resources"]["after_write"]["pss_mb"], base["resources"]["after_write"]["pss_mb"]
    assert same(rest[6], *pss)
