"""The quick runs of the other benches (``python -m bench NAME --quick``): each states its comparisons,
and they are the figures it measured, ours beside its baseline (:mod:`tests.support.bench_runs`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from bench.locomo import DEFAULT_DATA
from tests.support.bench_runs import bench, compared, positive, quick, same


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
    if name == "fold":  # the bands beside the word index (SQLite), the exact search, the HNSW graph, and as a
        # sentence embedder's store folds (by words): each finds the edited copies' originals, the exact ways all
        vectors, words, bands, by_words, by_word_bands, hnsw, pg_bands, pg_word_bands = result["modes"]
        copies = result["edited_copies"]
        exact = (vectors, words, by_words)
        assert all(row["edited_copies_found"] == copies for row in exact), exact
        assert hnsw["fold"] == "postgresql: HNSW" and 0 < hnsw["edited_copies_found"] <= copies
        for banded in (bands, by_word_bands, pg_bands, pg_word_bands):
            assert 0.9 * copies <= banded["edited_copies_found"] <= copies, banded
            for key in ("remember_p50_ms", "remember_many_per_s", "remember_many_one_by_one_per_s"):
                assert positive(banded[key]), (banded["fold"], key)
        # the base is written in one transaction, which bands the newest rows only; its copy keeps the bands
        assert result["catch_up"]["sqlite"]["rows"] > 0 and result["catch_up"]["postgresql"]["rows"] == 0
        return 20, bands["fold_search_p50_ms"], words["fold_search_p50_ms"]
    if name == "sync":
        assert result["notes"] == SYNC_NOTES and result["embedder"] == "hash"
        for key in ("first_sync_store_notes_per_s", "baseline_export_import_notes_per_s", "incremental_100_http_s",
                    "incremental_100_store_s", "nothing_new_http_ms", "nothing_new_store_ms"):  # fmt: skip
            assert positive(result[key]), key
        return 2, result["first_sync_http_notes_per_s"], result["baseline_remember_many_notes_per_s"]
    if name == "trailing":  # SQLite's single remember p50, vectors after the write beside embedded in it
        by = {(r["engine"], r["way"]): r for r in result["results"]}
        assert len(by) == 4 and all(r["base_notes"] == TRAILING_NOTES for r in by.values())
        assert all(positive(r["batch_vectors_done_s"]) for r in by.values())
        return (
            4,
            by[("sqlite", "vectors after the write")]["single_p50_ms"],
            by[("sqlite", "embedded in the write")]["single_p50_ms"],
        )
    if name == "recall_dense":  # MiniLM: the sign-bit cut beside the exact scan, both of the same queries
        by = {(r["engine"], r["way"]): r for r in result["results"]}
        cut, exact = by[("sqlite", "sign-bit cut")], by[("sqlite", "exact")]
        assert exact["vector_top10_kept_pct"] == 100.0 and 90.0 <= cut["vector_top10_kept_pct"] <= 100.0, cut
        assert 0 < by[("postgresql", "HNSW")]["recall_top10_same_pct"] <= 100.0
        # PostgreSQL asked at once gives the answers it gave one part after another
        assert by[("postgresql", "HNSW")]["top10_same_as_before_pct"] == 100.0
        return 4, cut["p50_ms"], exact["p50_ms"]
    if name == "workspace_bytes":  # the table's figures, rounded to 0.01 ms
        first = result["rows"][0]
        return 8, first["row write ms"], first["file write ms"]
    assert name == "locomo"
    assert result["conversations"] == ["conv-30"] and result["turns"] == LOCOMO_TURNS
    runs = result["results"]
    pg = "fabric default (hash + bm25) on PostgreSQL" in runs
    assert pg == ("fabric minilm (onnx int8 + bm25) on PostgreSQL" in runs)  # both engines, both embedders
    # the sentence embedder is in every install: the default fabric, the MiniLM fabric and BM25 run together
    minilm = runs["fabric minilm (onnx int8 + bm25)"]
    assert runs["minilm cosine only (baseline)"]["n"] == minilm["n"] == runs["bm25 only (baseline)"]["n"]
    assert result["minilm_texts"] > minilm["n"] and result["minilm_embed_seconds"] > 0
    return (
        3 * (5 + 2 * pg),
        runs["fabric default (hash + bm25)"]["recall@1"],
        runs["bm25 only (baseline)"]["recall@1"],
    )


# sync's quick run on fewer notes than its 5,000: every measure still taken (a store loaded, synced to a
# file and through afi serve, then changes, then nothing), in a tenth of the time
SYNC_NOTES = 600

# LoCoMo's quick conversation cut to its first 10 sessions (of 19): 190 turns and the 42 questions they
# answer (of 369 and 81), every retriever still run; half the sentence embedder's texts and notes.
LOCOMO_TURNS = 190


# the default install's writes over a base of this many notes (made with their vectors first)
TRAILING_NOTES = 300


@pytest.mark.parametrize("name", ["ssh", "ledger", "recall", "remember", "workspace_bytes", "fold", "sync"])
def test_a_quick_run_states_its_comparisons(name: str, tmp_path: Path) -> None:
    check_quick_run(name, tmp_path)


def check_quick_run(name: str, tmp_path: Path) -> None:
    """Run bench ``name`` quick and check it states its comparisons, the first as its own figures."""
    if name == "remember" and importlib.util.find_spec("agentfs_sdk") is None:
        pytest.skip("remember's baseline is the AgentFS SDK, in the bench extra: pip install -e '.[bench]'")
    if name in ("ledger", "locomo") and not DEFAULT_DATA.exists():
        pytest.skip(f"LoCoMo data not found at {DEFAULT_DATA}")
    notes = {"locomo": LOCOMO_TURNS, "sync": SYNC_NOTES, "trailing": TRAILING_NOTES}.get(name)
    result = quick(name, tmp_path, *([f"--notes={notes}"] if notes else []))
    count, ours, baseline = _expected(name, result)
    pairs = compared(result, count)
    assert same(pairs[0], ours, baseline, rounded=0.006 if name == "workspace_bytes" else 1e-4)


def test_folders_figures_are_consistent(tmp_path: Path) -> None:
    result = bench("folders", tmp_path, "--files", "3000")
    assert result["bench"] == "folders" and result["files"] == 3000 and result["grep_files"] == 0
    assert (result["list_100"]["pages"], result["list_1000"]["pages"]) == (30, 3)
    for key in ("list_100", "list_1000", "search_first", "search_again"):
        figures = result[key]
        assert figures["pages"] >= 1 and 0 < figures["p50_ms"] <= figures["max_ms"], (key, figures)
    pairs = compared(result, 3)
    assert same(pairs[0], result["list_100"]["p50_ms"], result["scandir_ms"])
    assert same(pairs[1], result["list_1000"]["p50_ms"], result["scandir_ms"])
    assert same(pairs[2], result["search_first"]["first_ms"], result["grep_ms"])


def test_web_render_figures_are_consistent(tmp_path: Path) -> None:
    result = quick("web_render", tmp_path)
    pages = {row["page"]: row for row in result["pages"]}
    assert len(pages) == 6 and pages["README"]["rendered"] is True
    assert not any(row["rendered"] for name, row in pages.items() if name != "README"), "bombs show as text"
    assert all(row["cpu_ms"] >= 0 and row["whole_render_cpu_ms"] > 0 for row in pages.values())
    (pair,) = compared(result, 1)
    worst = max(row["cpu_ms"] for row in pages.values())
    assert same(pair, worst, max(row["whole_render_cpu_ms"] for row in pages.values()))
