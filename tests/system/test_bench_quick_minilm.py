"""The quick runs of the benches that embed with the sentence model (MiniLM), each tens of seconds: in a
file of their own, so ``--dist loadfile`` runs them on one worker while the other quick runs go on the
other (one file of them all was the whole run's longest path)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.system.test_bench_quick import check_quick_run

# the bench runs as a process of its own (tests.support.bench_runs), which the lanes read from the
# imports of test_bench_quick, not of this file; slow: placed among the first files before it is timed
pytestmark = [pytest.mark.process, pytest.mark.slow]


@pytest.mark.parametrize("name", ["trailing", "recall_dense", "locomo"])
def test_a_quick_run_of_the_sentence_model_states_its_comparisons(name: str, tmp_path: Path) -> None:
    check_quick_run(name, tmp_path)
