"""Adjacent notes lend relevance in recall: the rule alone, then through recall on both engines."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from afi.providers.memory import MemoryFabric, MemoryValidationError, create_memory, create_memory_fabric
from afi.providers.memory.fabric.adjacency import SAME_MOMENT_SECONDS, adjacent_rowids, lift

DAY = 86_400.0
LEXICAL = {"mode": "lexical", "adjacent_weight": 0.5}


def test_adjacent_rowids_are_the_unknown_rows_within_the_span() -> None:
    assert adjacent_rowids([5], {5}, 2) == [4, 6, 3, 7]
    assert adjacent_rowids([1, 2], {1, 2, 3}, 1) == []  # 0 is no rowid, 3 is known
    assert adjacent_rowids([10, 12], {10, 12}, 1) == [9, 11, 13]


def test_a_neighbour_lends_its_relevance_halved_for_each_step_away() -> None:
    moments = {1: 0.0, 2: 0.0, 3: 0.0}
    lifted = {rowid: (relevance, lent) for rowid, relevance, lent in lift([(1, 0.8)], moments, 0.5, 2)}
    assert lifted[1] == (0.8, 0.0)  # nothing beside it is relevant
    assert lifted[2] == pytest.approx((0.4, 0.4))  # one step: 0.5 x 0.8
    assert lifted[3] == pytest.approx((0.2, 0.2))  # two steps: 0.5 x 0.8 x 0.5


def test_lent_relevance_fills_what_own_relevance_leaves_and_stays_under_one() -> None:
    moments = {1: 0.0, 2: 0.0, 3: 0.0}
    lifted = {
        rowid: (relevance, lent) for rowid, relevance, lent in lift([(1, 1.0), (2, 0.6), (3, 1.0)], moments, 1.0, 1)
    }
    assert lifted[1] == (1.0, 0.0)  # a note at 1 keeps 1
    # noisy-or of two neighbours at 1: all of what 0.6 leaves
    assert lifted[2] == pytest.approx((1.0, 0.4))


def test_notes_about_other_moments_lend_nothing_and_notes_without_one_keep_their_own() -> None:
    moments = {1: 0.0, 2: SAME_MOMENT_SECONDS + 1, 3: SAME_MOMENT_SECONDS}
    out = lift([(1, 0.9), (4, 0.7)], moments, 0.5, 2)
    assert [(rowid, lent) for rowid, _, lent in out] == [(1, 0.0), (4, 0.0), (3, pytest.approx(0.225))]
    # 2 is more than an hour after 1: nothing lent, so it stays out; 4 has no moment: its own relevance only


def test_the_order_is_by_relevance_then_the_fused_order() -> None:
    out = lift([(7, 0.5), (3, 0.5), (9, 0.2)], {7: 0.0, 3: DAY, 9: 3 * DAY}, 0.5, 1)
    assert [rowid for rowid, _, _ in out] == [7, 3, 9]


@pytest.fixture
def fabric(store_url: str) -> Iterator[MemoryFabric]:
    memory = create_memory(store_url, tenant_id="acme", resource_id="user-1", thread_id="t1")
    yield create_memory_fabric(memory, consolidate=False)
    memory.close()


def _conversation(fabric: MemoryFabric) -> dict[str, str]:
    """Two sessions a week apart, stored turn by turn; the answer to the first question shares no word with it."""
    turns = [
        ("ask", "2026-05-01T10:00:00Z", "Melanie: what did you paint last weekend?"),
        ("answer", "2026-05-01T10:00:00Z", "Caroline: a sunset over the lake, orange clouds and all"),
        ("later", "2026-05-08T18:30:00Z", "Caroline: the bus was late again this morning"),
        ("reply", "2026-05-08T18:30:00Z", "Melanie: traffic downtown is terrible on Mondays"),
    ]
    return {key: fabric.remember(kind="fact", content=text, t_ref=when).id for key, when, text in turns}


def test_an_answer_is_recalled_through_the_turn_before_it(fabric: MemoryFabric) -> None:
    ids = _conversation(fabric)
    plain = fabric.recall("paint weekend", scoring={"fusion": {"mode": "lexical", "adjacent_weight": 0}})
    assert [h.id for h in plain.hits] == [ids["ask"]]
    assert plain.explain[0].adjacent is None  # the signal is off: nothing to explain
    lifted = fabric.recall("paint weekend", scoring={"fusion": LEXICAL})
    assert [h.id for h in lifted.hits] == [ids["ask"], ids["answer"]]
    assert [e.adjacent for e in lifted.explain] == [0.0, pytest.approx(0.5)]
    assert lifted.hits[1].score == pytest.approx(0.5)  # all of its relevance was lent


def test_a_neighbour_from_another_session_is_not_lifted(fabric: MemoryFabric) -> None:
    ids = _conversation(fabric)
    found = fabric.recall("terrible traffic", scoring={"fusion": LEXICAL})
    # "later" is the row before and the same session: lifted; "answer" is one more row back but a week earlier
    assert [h.id for h in found.hits] == [ids["reply"], ids["later"]]


def test_adjacency_adds_to_the_fused_relevance(fabric: MemoryFabric) -> None:
    ids = _conversation(fabric)
    off = fabric.recall("paint weekend", top_k=4, scoring={"fusion": {"adjacent_weight": 0}})
    on = fabric.recall("paint weekend", top_k=4, scoring={"fusion": {"adjacent_weight": 0.4}})
    before = {h.id: h.score for h in off.hits}
    after = {h.id: (h.score, e.adjacent) for h, e in zip(on.hits, on.explain, strict=True)}
    ask, answer = before[ids["ask"]], before[ids["answer"]]
    lent = 0.4 * ask * (1 - answer)
    assert after[ids["answer"]] == (pytest.approx(answer + lent), pytest.approx(lent))
    assert on.hits[1].id == ids["answer"]
    # "later" is the row after "answer" but a week later: only "reply", of its own session, lends to it
    later, reply = before[ids["later"]], before[ids["reply"]]
    assert after[ids["later"]][1] == pytest.approx(0.4 * reply * (1 - later))


def test_a_forgotten_neighbour_does_not_join(fabric: MemoryFabric) -> None:
    ids = _conversation(fabric)
    fabric.forget(id=ids["answer"])
    found = fabric.recall("paint weekend", scoring={"fusion": LEXICAL})
    assert [h.id for h in found.hits] == [ids["ask"]]


def test_notes_without_t_ref_take_no_part(fabric: MemoryFabric) -> None:
    first = fabric.remember(kind="fact", content="the deploy key lives in the vault")
    fabric.remember(kind="fact", content="rotate it every ninety days")
    found = fabric.recall("deploy key vault", scoring={"fusion": LEXICAL})
    assert [h.id for h in found.hits] == [first.id]
    assert [e.adjacent for e in found.explain] == [0.0]


def test_messages_minutes_apart_are_one_run(fabric: MemoryFabric) -> None:
    first = fabric.remember(kind="fact", content="the deploy key lives in the vault", t_ref="2026-03-02T09:00:00Z")
    second = fabric.remember(kind="fact", content="rotate it every ninety days", t_ref="2026-03-02T09:40:00Z")
    found = fabric.recall("deploy key vault", scoring={"fusion": LEXICAL})
    assert [h.id for h in found.hits] == [first.id, second.id]


def test_another_scope_lends_nothing(store_url: str) -> None:
    mine = create_memory(store_url, tenant_id="acme", resource_id="user-1", thread_id="t1")
    theirs = create_memory(store_url, tenant_id="acme", resource_id="user-2", thread_id="t1")
    try:
        a = create_memory_fabric(mine, consolidate=False)
        b = create_memory_fabric(theirs, consolidate=False)
        asked = a.remember(kind="fact", content="what did you paint last weekend?")
        b.remember(kind="fact", content="a sunset over the lake")
        found = a.recall("paint weekend", scoring={"fusion": LEXICAL})
        assert [h.id for h in found.hits] == [asked.id]
    finally:
        mine.close()
        theirs.close()


@pytest.mark.parametrize(
    "fusion",
    [
        pytest.param({"adjacent_weight": 1.5}, id="weight-over-one"),
        pytest.param({"adjacent_weight": -0.1}, id="weight-negative"),
        pytest.param({"adjacent_weight": "0.3"}, id="weight-a-string"),
        pytest.param({"adjacent_span": 0}, id="span-zero"),
        pytest.param({"adjacent_span": 9}, id="span-over-eight"),
        pytest.param({"adjacent_span": 1.5}, id="span-not-integer"),
    ],
)
def test_bad_adjacency_settings_are_refused(fabric: MemoryFabric, fusion: dict[str, object]) -> None:
    with pytest.raises(MemoryValidationError, match="adjacent"):
        fabric.recall("anything", scoring={"fusion": fusion})
