"""search_conversation and the branch page, over a real ledger (on each engine: a SQLite file, then a
PostgreSQL database) and over a plain entries() source."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from afi.providers.memory import MemoryValidationError, create_ledger, create_memory, create_memory_fabric
from afi.providers.memory.ledger.conversation import (
    ConversationAbortedError,
    LedgerSource,
    branch_page,
    search_conversation,
)
from afi.providers.memory.ledger.ledger import LedgerSession

TEXTS = [
    ("user", "Let us plan the canary rollout for Friday"),
    ("assistant", "Canary at five percent, then the rollout"),
    ("system", "canary rollout canary rollout"),
    ("user", "What about the database migration?"),
    ("assistant", "The migration runs after the canary"),
    ("tool", "deploy ok"),
    ("user", "Thanks"),
]


@pytest.fixture
def session(store_url: str) -> LedgerSession:
    s = create_ledger(db=store_url).session("s1")
    s.append_many(
        {"role": r, "text": t, "entry_id": f"m{i}", "timestamp": f"2026-01-01T00:0{i}:00Z"}
        for i, (r, t) in enumerate(TEXTS)
    )
    return s


class _Plain:
    """Any host session: an id and entries(), the fabric's minimal observational contract."""

    def __init__(self, entries: list[dict[str, Any]]) -> None:
        self.session = self
        self.id = "s1"
        self._entries = entries

    def entries(self) -> list[dict[str, Any]]:
        return self._entries


def test_hits_rank_by_term_coverage_then_newest(session: LedgerSession) -> None:
    result = search_conversation(LedgerSource(session), "canary rollout", limit=2, top_k=3)
    assert [(h.entry_id, h.score) for h in result.hits] == [("m1", 1.0), ("m0", 1.0), ("m4", 0.5)]
    assert result.scanned == 3  # the messages holding a term; the system message is not a message page
    first = result.hits[0]
    assert first.timestamp == "2026-01-01T00:01:00.000Z"
    assert [e["id"] for e in first.page.entries] == ["m0", "m1"] and first.page.next_cursor == "m3"
    assert first.page.text.splitlines()[1] == "[m1] assistant: Canary at five percent, then the rollout"


def test_ledger_index_and_plain_scan_agree(session: LedgerSession) -> None:
    plain = _Plain(session.entries())
    for query in ("canary rollout", "migration", "deploy thanks", "five percent database"):
        indexed = search_conversation(LedgerSource(session), query, limit=3, top_k=5, direction="forward")
        scanned = search_conversation(plain, query, limit=3, top_k=5, direction="forward")
        assert indexed.hits == scanned.hits, query
    assert search_conversation(plain, "canary").scanned == 6  # a scan scores every message


def test_page_directions_and_cursors(session: LedgerSession) -> None:
    messages = [e for e in session.entries() if e["role"] != "system"]
    back = branch_page(messages, "m4", limit=2)
    assert [e["id"] for e in back.entries] == ["m3", "m4"] and back.next_cursor == "m1" and back.prev_cursor == "m1"
    fwd = branch_page(messages, "m3", limit=2, direction="forward", detail="full")
    assert [e["id"] for e in fwd.entries] == ["m3", "m4"] and fwd.next_cursor == "m5"
    assert "(2026-01-01T00:03:00.000Z)" in fwd.text
    indexed = branch_page(LedgerSource(session).messages(), "m3", limit=2, direction="forward", detail="full")
    assert indexed == fwd
    assert branch_page(messages, "zz").reason == "cursor_not_found"
    assert branch_page(messages, "m1", limit=101).reason == "limit_exceeded"
    assert branch_page(LedgerSource(session).messages(), "m2").reason == "cursor_not_found"  # system


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param({"limit": 0}, "limit", id="limit-0"),
        pytest.param({"limit": 101}, "limit", id="limit-101"),
        pytest.param({"top_k": 0}, "top_k", id="top-k-0"),
        pytest.param({"direction": "up"}, "direction", id="direction"),
        pytest.param({"detail": "all"}, "detail", id="detail"),
    ],
)
def test_bad_options_are_refused(session: LedgerSession, options: dict[str, Any], message: str) -> None:
    with pytest.raises(MemoryValidationError, match=message):
        search_conversation(LedgerSource(session), "canary", **options)


def test_empty_query_and_missing_source_fail_closed(tmp_path: Path, session: LedgerSession) -> None:
    with pytest.raises(MemoryValidationError, match="two or more"):
        search_conversation(LedgerSource(session), "a ! ?")
    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c")
    with pytest.raises(MemoryValidationError, match="observational"):
        create_memory_fabric(memory).search_conversation("canary")
    memory.close()


class _CountingSignal:
    """An abort signal that trips after being asked ``after`` times (as a host's cancel would)."""

    def __init__(self, after: int) -> None:
        self.asked = 0
        self.after = after

    def is_set(self) -> bool:
        self.asked += 1
        return self.asked > self.after


def test_abort_signal_stops_the_scan(session: LedgerSession) -> None:
    """Over the index a set signal refuses the search, or stops it while the hits' pages are built; a
    plain scan of 5000 messages looks at the signal every 1000 and stops at the third look."""
    done = threading.Event()
    done.set()
    with pytest.raises(ConversationAbortedError):
        search_conversation(LedgerSource(session), "canary", signal=done)
    with pytest.raises(ConversationAbortedError):  # set while the hits' pages are being built
        search_conversation(LedgerSource(session), "canary", signal=_CountingSignal(after=2))
    big = [{"type": "message", "id": f"x{i}", "role": "user", "text": "canary", "timestamp": "t"} for i in range(5000)]
    signal = _CountingSignal(after=2)
    with pytest.raises(ConversationAbortedError):
        search_conversation(_Plain(big), "canary", signal=signal)
    assert signal.asked == 3  # the scan stopped at its third check, not at the end
    assert search_conversation(LedgerSource(session), "canary", signal=threading.Event()).hits


def test_fabric_search_conversation_through_the_ledger(store_url: str) -> None:
    ledger = create_ledger(db=store_url)
    s = ledger.session("s1")
    s.append(role="user", text="We roll out with a canary", entry_id="m1")
    memory = create_memory(store_url, tenant_id="a", resource_id="default", thread_id="t")
    fabric = create_memory_fabric(memory, observational=ledger.attach(s))
    result = fabric.search_conversation("canary", limit=1)
    assert [h.entry_id for h in result.hits] == ["m1"] and result.hits[0].page.limit == 1
    memory.close()


def test_full_coverage_shortcut_scores_fewer_and_agrees(store_url: str) -> None:
    """30 messages, every one holding "canary" and every third "rollout" too (10 of them)."""
    s = create_ledger(db=store_url).session("s1")
    s.append_many(
        {"role": "user", "text": "canary rollout" if i % 3 == 0 else "canary only", "entry_id": f"k{i:02d}",
         "timestamp": f"2026-01-01T00:00:{i:02d}Z"} for i in range(30)
    )  # fmt: skip
    indexed = search_conversation(LedgerSource(s), "canary rollout", top_k=4)
    plain = search_conversation(_Plain(s.entries()), "canary rollout", top_k=4)
    assert indexed.hits == plain.hits and [h.entry_id for h in indexed.hits] == ["k27", "k24", "k21", "k18"]
    assert indexed.scanned == 10 and plain.scanned == 30  # only the messages holding every term were scored
