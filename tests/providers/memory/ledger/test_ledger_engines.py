"""What the ledger must keep on either engine beyond one caller at a time: concurrent writers, the
index's idea of a word, hostile query text, and (on PostgreSQL) an abort that cancels a running
statement."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from afi.providers.memory import MemoryConflictError, create_ledger
from afi.providers.memory.ledger.conversation import ConversationAbortedError, LedgerSource, search_conversation
from afi.providers.memory.ledger.ledger import Ledger


def _at_once(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(0..count-1)`` on as many threads, released together; return results (or errors) in order."""
    barrier = threading.Barrier(count)
    out: list[Any] = [None] * count

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = work(i)
        except Exception as err:  # handed back to the test, which says what it expects
            out[i] = err

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_concurrent_appends_keep_one_dense_branch(store_url: str) -> None:
    """4 threads append 25 messages each (one transaction per message) to one session at once: the
    branch holds all 100 at positions 0..99, each thread's in its own order, each indexed once."""
    ledger = create_ledger(db=store_url)

    def work(w: int) -> None:
        s = ledger.session("s1")
        for i in range(25):
            s.append(role="user", text=f"worker{w} item{i:02d}", entry_id=f"w{w}-{i:02d}")

    assert _at_once(4, work) == [None] * 4
    session = ledger.session("s1")
    entries = list(session.iter_entries())
    assert [e.position for e in entries] == list(range(100))
    for w in range(4):
        assert [e.id for e in entries if e.id.startswith(f"w{w}-")] == [f"w{w}-{i:02d}" for i in range(25)]
    messages = LedgerSource(session).messages()
    assert messages.count() == 100 and [m["id"] for m in messages.slice(0, 100)] == [e.id for e in entries]
    for w in range(4):
        assert search_conversation(LedgerSource(session), f"worker{w}").scanned == 25


def test_racing_sessions_take_an_id_once(store_url: str) -> None:
    """8 threads get-or-create one new session at once (one key for all); then 4 sessions record an
    observation with the same id at once: one records it, the other 3 are refused."""
    ledger = create_ledger(db=store_url)
    keys = _at_once(8, lambda _: ledger.session("fresh").key)
    assert len(set(keys)) == 1 and ledger.sessions() == ["fresh"]
    sessions = [ledger.session(f"s{i}") for i in range(4)]
    for s in sessions:
        s.append(role="user", text="We roll out with a canary", entry_id="m1")
    outcomes = _at_once(4, lambda i: sessions[i].observe(text=f"fact {i}", source_entry_ids=["m1"], id="abcdef012345"))
    taken = [o for o in outcomes if isinstance(o, MemoryConflictError)]
    assert len(taken) == 3 and all("already taken" in str(o) for o in taken)
    assert [o.id for o in ledger.observations()] == ["abcdef012345"]


TEXTS = [
    "Le Café ouvre à huit heures",
    "deploy.py failed on the five-percent canary",
    "Ёлка, x² and H₂O",
    "İstanbul: a naïve façade",
    "a" * 3000 + " tail",
]


@pytest.mark.parametrize(
    ("query", "hits"),
    [
        pytest.param("cafe", ["m0"], id="diacritics-removed"),
        pytest.param("CAFÉ", ["m0"], id="query-folded-too"),
        pytest.param("py", ["m1"], id="file-name-split"),
        pytest.param("percent", ["m1"], id="hyphen-split"),
        pytest.param("ёлка", ["m2"], id="cyrillic"),
        pytest.param("елка", [], id="cyrillic-keeps-its-marks"),
        pytest.param("x²", ["m2"], id="superscript"),
        pytest.param("istanbul naive facade", ["m3"], id="dotted-capital"),
        pytest.param("a" * 3000, ["m4"], id="word-over-2047-bytes"),
    ],
)
def test_the_index_finds_words_as_fts5_does(store_url: str, query: str, hits: list[str]) -> None:
    """The words FTS5's unicode61 tokenizer (diacritics removed) makes of a message are the ones the
    PostgreSQL index holds: each query here finds the same messages on both engines."""
    s = create_ledger(db=store_url).session("s1")
    s.append_many({"role": "user", "text": t, "entry_id": f"m{i}"} for i, t in enumerate(TEXTS))
    result = search_conversation(LedgerSource(s), query, top_k=10)
    assert [h.entry_id for h in result.hits] == hits and all(h.score == 1.0 for h in result.hits)


def _indexed(ledger: Ledger) -> int:
    with ledger.database.read() as conn:
        return int(conn.execute("SELECT COUNT(*) FROM ledger_fts").fetchone()[0])


def test_hostile_query_text_is_only_ever_terms(store_url: str) -> None:
    """Quotes, operators and SQL in a query are words to look for, on either engine."""
    ledger = create_ledger(db=store_url)
    s = ledger.session("s1")
    s.append_many([{"role": "user", "text": "canary rollout", "entry_id": "m1"},
                   {"role": "user", "text": "drop the table", "entry_id": "m2"}])  # fmt: skip
    for query in ("canary') OR 1=1; DROP TABLE ledger_fts; --", "body : * NEAR(\"rollout\" canary) \\ 'x':*"):
        result = search_conversation(LedgerSource(s), query, top_k=5)
        assert {h.entry_id for h in result.hits} <= {"m1", "m2"} and result.hits
    assert _indexed(ledger) == 2  # the index is still there, with its two messages


def test_abort_cancels_a_running_statement(pg_store_url: str) -> None:
    """Another connection holds the index locked for up to 10 s, so the search's statement waits; the
    signal, set 0.3 s in, cancels it (looked at every 0.02 s): the search stops within 5 s, and the
    connection it used serves the next search and append."""
    s = create_ledger(db=pg_store_url).session("s1")
    s.append(role="user", text="canary rollout", entry_id="m1")
    locked, release, signal = threading.Event(), threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(pg_store_url, autocommit=True) as blocker, blocker.transaction():
            blocker.execute("LOCK TABLE ledger_fts IN ACCESS EXCLUSIVE MODE")
            locked.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert locked.wait(10)
    timer = threading.Timer(0.3, signal.set)
    timer.start()
    started = time.monotonic()
    try:
        with pytest.raises(ConversationAbortedError):
            search_conversation(LedgerSource(s), "canary rollout", signal=signal)
        elapsed = time.monotonic() - started
    finally:
        release.set()
        holder.join()
        timer.join()
    assert 0.3 <= elapsed < 5
    assert [h.entry_id for h in search_conversation(LedgerSource(s), "canary").hits] == ["m1"]
    s.append(role="assistant", text="canary done", entry_id="m2")
    again = search_conversation(LedgerSource(s), "canary", signal=threading.Event())
    assert [h.entry_id for h in again.hits] == ["m2", "m1"]
