"""The time a question names: the parser alone, then the date signal through recall on both engines."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from afi.providers.memory import MemoryFabric, RecallResult, create_memory, create_memory_fabric
from afi.providers.memory.fabric.dates import query_window
from afi.providers.memory.fabric.moments import Moment

NOW = datetime(2026, 12, 4, 15, 30, tzinfo=UTC)  # a Friday


def _days(text: str) -> tuple[str, str] | None:
    found = query_window(text, NOW)
    return None if found is None else (found[0].date().isoformat(), found[1].date().isoformat())


@pytest.mark.parametrize(
    ("text", "window"),
    [
        pytest.param("What did Melanie show on October 13, 2023?", ("2023-10-13", "2023-10-14"), id="month-day-year"),
        pytest.param("What did Gina find on 1 February, 2023?", ("2023-02-01", "2023-02-02"), id="day-month-year"),
        pytest.param("the 3rd of March 2024", ("2024-03-03", "2024-03-04"), id="ordinal-of"),
        pytest.param("Sept 9 2025", ("2025-09-09", "2025-09-10"), id="abbreviated"),
        pytest.param("What did they paint in July 2023?", ("2023-07-01", "2023-08-01"), id="month-year"),
        pytest.param("in February 2024", ("2024-02-01", "2024-03-01"), id="leap-february"),
        pytest.param("early November 2022", ("2022-11-01", "2022-11-11"), id="early-month"),
        pytest.param("the beginning of November 2022", ("2022-11-01", "2022-11-11"), id="beginning-of"),
        pytest.param("late December 2022", ("2022-12-21", "2023-01-01"), id="late-month"),
        pytest.param("the first half of September 2022", ("2022-09-01", "2022-09-16"), id="first-half"),
        pytest.param("in summer 2021", ("2021-06-01", "2021-09-01"), id="season"),
        pytest.param("winter of 2020", ("2020-12-01", "2021-03-01"), id="winter-spans-years"),
        pytest.param("How often in 2023?", ("2023-01-01", "2024-01-01"), id="year"),
        pytest.param("two weeks before August 11, 2023", ("2023-07-28", "2023-08-04"), id="weeks-before"),
        pytest.param("the week before August 3, 2023", ("2023-07-27", "2023-08-03"), id="the-week-before"),
        pytest.param("last weekend before April 10, 2023", ("2023-04-03", "2023-04-10"), id="weekend-before"),
        pytest.param("3 days after 1 May 2023", ("2023-05-04", "2023-05-05"), id="days-after"),
        pytest.param("a month after January 31, 2023", ("2023-02-01", "2023-03-01"), id="month-after-clamped"),
        pytest.param("what happened yesterday", ("2026-12-03", "2026-12-04"), id="yesterday"),
        pytest.param("anything today?", ("2026-12-04", "2026-12-05"), id="today"),
        pytest.param("3 days ago", ("2026-12-01", "2026-12-02"), id="days-ago"),
        pytest.param("two months ago", ("2026-09-04", "2026-11-04"), id="months-ago"),
        pytest.param("last week", ("2026-11-23", "2026-11-30"), id="last-week"),
        pytest.param("this week", ("2026-11-30", "2026-12-07"), id="this-week"),
        pytest.param("the past month", ("2026-11-01", "2026-12-01"), id="past-month"),
        pytest.param("last year", ("2025-01-01", "2026-01-01"), id="last-year"),
        pytest.param("what did I do last May", ("2026-05-01", "2026-06-01"), id="last-month-name"),
        pytest.param("camping in June", ("2026-06-01", "2026-07-01"), id="month-this-year"),
        pytest.param("in December", ("2026-12-01", "2027-01-01"), id="the-current-month"),
        pytest.param("last December", ("2025-12-01", "2026-01-01"), id="last-current-month"),
        pytest.param("late March", ("2026-03-21", "2026-04-01"), id="late-bare-month"),
    ],
)
def test_a_question_names_a_window(text: str, window: tuple[str, str]) -> None:
    assert _days(text) == window


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("What did Caroline research?", id="no-time"),
        pytest.param("What may happen next?", id="may-the-verb"),
        pytest.param("Where will you march?", id="march-the-verb"),
        pytest.param("room 2023 on the third floor", id="a-number-is-no-year"),
        pytest.param("What did Melanie do after the road trip?", id="after-an-event"),
    ],
)
def test_text_without_a_time_names_none(text: str) -> None:
    assert query_window(text, NOW) is None


def test_a_day_that_does_not_exist_names_its_month() -> None:
    assert _days("the 31 June 2023 meeting") == ("2023-06-01", "2023-07-01")


def test_the_first_expression_wins_and_a_day_beats_its_own_month() -> None:
    assert _days("on 8 May, 2023 and again in June 2024") == ("2023-05-08", "2023-05-09")


def test_a_moment_meets_a_window_at_its_instant_or_by_overlap() -> None:
    assert Moment(10.0, 10.0, 10.0).meets(10.0, 20.0)
    assert not Moment(20.0, 20.0, 20.0).meets(10.0, 20.0)  # half-open
    assert Moment(0.0, 5.0, 15.0).meets(10.0, 20.0)  # a validity window overlapping it
    assert not Moment(0.0, 0.0, 10.0).meets(10.0, 20.0)
    assert Moment(0.0, float("-inf"), float("inf")).meets(10.0, 20.0)


@pytest.fixture
def fabric(store_url: str) -> Iterator[MemoryFabric]:
    memory = create_memory(store_url, tenant_id="acme", resource_id="user-1", thread_id="t1")
    yield create_memory_fabric(memory, consolidate=False)
    memory.close()


DATED = {"date_weight": 0.5, "adjacent_weight": 0}
UNDATED = {"date_weight": 0, "adjacent_weight": 0}


def _both(fabric: MemoryFabric, query: str, as_of: str | None = None) -> tuple[dict[str, float], RecallResult]:
    """The scores without the date signal, and the recall with it."""
    off = fabric.recall(query, as_of=as_of, top_k=10, scoring={"fusion": UNDATED})
    assert all(e.dated is None for e in off.explain)
    return {h.id: h.score for h in off.hits}, fabric.recall(query, as_of=as_of, top_k=10, scoring={"fusion": DATED})


def test_the_note_about_the_named_time_rises_and_the_others_fall(fabric: MemoryFabric) -> None:
    may = fabric.remember(kind="fact", content="Melanie painted the lake at night", t_ref="2023-05-08T13:56:00Z")
    july = fabric.remember(kind="fact", content="Melanie painted a sunset by the lake", t_ref="2023-07-02T10:00:00Z")
    plain, on = _both(fabric, "What did Melanie paint in July 2023?")
    assert plain[may.id] > plain[july.id]  # the words alone favour May's note
    assert [h.id for h in on.hits] == [july.id, may.id]
    parts = {e.id: e.dated for e in on.explain}
    assert parts == {july.id: pytest.approx(0.5 * (1 - plain[july.id])), may.id: pytest.approx(-0.5 * plain[may.id])}
    assert {h.id: h.score for h in on.hits} == {
        july.id: pytest.approx(0.5 * plain[july.id] + 0.5),
        may.id: pytest.approx(0.5 * plain[may.id]),
    }


def test_a_query_without_a_time_leaves_the_ranking_alone(fabric: MemoryFabric) -> None:
    fabric.remember(kind="fact", content="Melanie painted the lake at night", t_ref="2023-05-08T13:56:00Z")
    fabric.remember(kind="fact", content="Melanie painted a sunset by the lake", t_ref="2023-07-02T10:00:00Z")
    plain, on = _both(fabric, "What did Melanie paint?")
    assert {h.id: h.score for h in on.hits} == plain
    assert all(e.dated is None for e in on.explain)


def test_a_validity_window_meets_the_named_time(fabric: MemoryFabric) -> None:
    berlin = fabric.remember(kind="fact", content="the team office is in Berlin", valid_from="2020-01-01T00:00:00Z")
    paris = fabric.remember(
        kind="fact", content="the team office moved to Paris offices", valid_from="2027-01-01T00:00:00Z"
    )
    # at 2028 both are current (nothing ended Berlin's window); only Berlin's held in 2023
    plain, on = _both(fabric, "where was the team office in 2023?", as_of="2028-01-01T00:00:00Z")
    parts = {e.id: e.dated for e in on.explain}
    assert parts == {
        berlin.id: pytest.approx(0.5 * (1 - plain[berlin.id])),
        paris.id: pytest.approx(-0.5 * plain[paris.id]),
    }
    assert on.hits[0].id == berlin.id


def test_a_note_without_t_ref_or_window_is_about_when_it_was_written(fabric: MemoryFabric) -> None:
    note = fabric.remember(kind="fact", content="we picked the blue logo")
    plain, on = _both(fabric, "which logo did we pick in 2001?")
    assert {e.id: e.dated for e in on.explain} == {note.id: pytest.approx(-0.5 * plain[note.id])}


def test_relative_times_are_read_against_as_of(fabric: MemoryFabric) -> None:
    week_ago = fabric.remember(kind="fact", content="we shipped the importer", t_ref="2030-01-08T09:00:00Z")
    older = fabric.remember(kind="fact", content="we shipped the exporter", t_ref="2029-10-01T09:00:00Z")
    # 2030-01-16 is a Wednesday: last week ran from Monday 7 to Sunday 13 January
    plain, on = _both(fabric, "what did we ship last week?", as_of="2030-01-16T15:30:00Z")
    parts = {e.id: e.dated for e in on.explain}
    assert parts == {
        week_ago.id: pytest.approx(0.5 * (1 - plain[week_ago.id])),
        older.id: pytest.approx(-0.5 * plain[older.id]),
    }
    assert on.hits[0].id == week_ago.id
