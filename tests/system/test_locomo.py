"""The LoCoMo harness on one real conversation: recall@k over its questions, fabric vs its baselines."""

from __future__ import annotations

from typing import Any

import pytest

from afi.providers.memory import HashEmbedder
from bench.locomo import (
    DEFAULT_DATA,
    Conversation,
    Question,
    bm25_rankings,
    cosine_rankings,
    evaluate,
    fabric_rankings,
    load_conversations,
    recall_at,
    session_time,
)

pytestmark = pytest.mark.skipif(not DEFAULT_DATA.exists(), reason=f"LoCoMo data not found at {DEFAULT_DATA}")


@pytest.fixture(scope="module")
def conversation() -> Conversation:
    (conv,) = load_conversations(only=["conv-30"])
    return conv


def test_loader_keeps_turn_text_and_only_scored_questions(conversation: Conversation) -> None:
    assert len(conversation.turns) == 369
    assert len(conversation.questions) == 81
    assert all(q.category in (1, 2, 3, 4) and q.evidence for q in conversation.questions)
    dia_id, text = conversation.turns[0]
    assert (dia_id, text) == (
        "D1:1",
        "Gina (4:04 pm on 20 January, 2023): Hey Jon! Good to see you. What's up? Anything new?",
    )
    captioned = [t for _, t in conversation.turns if "[image: " in t]
    assert captioned, "turns with a blip_caption carry it in the note text"
    # each turn is about its session's time, as a host stores a conversation
    assert conversation.when["D1:1"] == "2023-01-20T16:04:00.000Z"
    assert set(conversation.when) == {dia_id for dia_id, _ in conversation.turns}


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        pytest.param("4:04 pm on 20 January, 2023", "2023-01-20T16:04:00.000Z", id="afternoon"),
        pytest.param("12:09 am on 13 September, 2023", "2023-09-13T00:09:00.000Z", id="past-midnight"),
        pytest.param("12:30 pm on 1 May, 2022", "2022-05-01T12:30:00.000Z", id="noon"),
    ],
)
def test_session_times_are_read_as_utc(text: str, iso: str) -> None:
    assert session_time(text) == iso


def test_recall_at_k_is_the_mean_share_of_evidence() -> None:
    questions = [Question("q1", frozenset({"a", "b"}), 1), Question("q2", frozenset({"c"}), 2)]
    rankings = [["x", "a", "y", "b"], ["c"]]
    assert recall_at(rankings, questions, ks=(1, 2, 4)) == {1: 50.0, 2: 75.0, 4: 100.0}
    with pytest.raises(ValueError):
        recall_at(rankings[:1], questions)


def test_fabric_default_beats_hash_cosine_and_is_computed_over_every_question(conversation: Conversation) -> None:
    hashed = HashEmbedder()
    results: dict[str, Any] = evaluate(
        [conversation],
        {
            "bm25": bm25_rankings,
            "hash": lambda c: cosine_rankings(c, hashed),
            "fabric": lambda c: fabric_rankings(c, hashed),
        },
    )
    assert {r["n"] for r in results.values()} == {81}
    rankings = fabric_rankings(conversation, hashed)
    assert len(rankings) == 81 and all(len(r) == 10 for r in rankings)
    assert all(r[:1] for r in rankings)
    # The fused default must clearly beat the hash embedder alone on the same conversation.
    assert results["fabric"]["recall@10"] > results["hash"]["recall@10"] + 10
    assert results["fabric"]["recall@10"] >= results["bm25"]["recall@10"] - 5
