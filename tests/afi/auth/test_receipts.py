"""Idempotency receipts on both engines: claim, finish, replay, refuse; and claimers racing for one key,
in threads of one process and in processes of their own (as two replicas on one PostgreSQL would)."""

from __future__ import annotations

import multiprocessing
import queue
import threading
from collections import Counter
from typing import Any

import pytest

from afi.auth.receipts import ReceiptStore
from afi.errors import Conflict
from afi.provider import Caller
from afi.storage.database import open_database
from tests.support.clock import Clock

ME = Caller("alice", "default")
WAIT = 60.0  # seconds a racer waits at the start line before the test gives up


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def receipts(store_url: str, clock: Clock) -> ReceiptStore:
    return ReceiptStore(store_url, clock=clock)


def test_a_completed_call_replays_from_another_store_on_the_same_database(
    receipts: ReceiptStore, store_url: str
) -> None:
    claim = receipts.claim(ME, "afi.write", "k1", {"path": "/x", "data": "é"})
    assert claim.action == "run" and not claim.reclaimed
    assert receipts.status(ME, "afi.write", "k1") == "running"
    finished, stored = receipts.finish(claim, result={"structured": {"n": 1}, "text": "t"}, failed=False)
    assert stored and finished.completed_at is not None
    again = ReceiptStore(store_url).claim(ME, "afi.write", "k1", {"data": "é", "path": "/x"})
    assert (again.action, again.execution_id) == ("replay", claim.execution_id)
    assert again.result == {"structured": {"n": 1}, "text": "t"}
    assert again.started_at == claim.started_at and again.completed_at == finished.completed_at
    assert receipts.status(ME, "afi.write", "k1") == "completed"
    assert receipts.status(ME, "afi.write", "missing") is None


def test_other_arguments_conflict_and_other_principals_spaces_tools_do_not(receipts: ReceiptStore) -> None:
    receipts.finish(receipts.claim(ME, "afi.write", "k", {"path": "/x"}), result={}, failed=False)
    with pytest.raises(Conflict, match="other arguments") as caught:
        receipts.claim(ME, "afi.write", "k", {"path": "/y"})
    assert caught.value.retry_after is None
    assert receipts.claim(Caller("bob"), "afi.write", "k", {"path": "/y"}).action == "run"
    assert receipts.claim(Caller("alice", "other"), "afi.write", "k", {"path": "/y"}).action == "run"
    assert receipts.claim(ME, "afi.move", "k", {"path": "/y"}).action == "run"


def test_a_running_call_is_retried_until_stale_and_its_late_finish_is_not_stored(
    receipts: ReceiptStore, clock: Clock
) -> None:
    first = receipts.claim(ME, "afi.write", "k", {"path": "/x"})
    with pytest.raises(Conflict, match="still running") as caught:
        receipts.claim(ME, "afi.write", "k", {"path": "/x"})
    assert caught.value.retry_after == 1.0
    with pytest.raises(Conflict, match="running call with other arguments"):
        receipts.claim(ME, "afi.write", "k", {"path": "/y"})
    clock.now += 10 * 60 + 1
    taken = receipts.claim(ME, "afi.write", "k", {"path": "/x"})
    assert taken.action == "run" and taken.reclaimed and taken.execution_id != first.execution_id
    assert receipts.finish(first, result={"late": True}, failed=False)[1] is False
    assert receipts.status(ME, "afi.write", "k") == "running"
    assert receipts.finish(taken, result={"on": "time"}, failed=False)[1] is True


def test_failed_and_expired_receipts_are_claimed_again(receipts: ReceiptStore, clock: Clock) -> None:
    claim = receipts.claim(ME, "afi.write", "k", {"path": "/x"})
    assert receipts.finish(claim, result=None, failed=True)[1] is False
    assert receipts.status(ME, "afi.write", "k") == "failed"
    retry = receipts.claim(ME, "afi.write", "k", {"path": "/x"})
    assert retry.action == "run" and retry.reclaimed
    receipts.finish(retry, result={"ok": 1}, failed=False)
    clock.now += 24 * 3600 + 1
    fresh = receipts.claim(ME, "afi.write", "k", {"path": "/other"})
    assert fresh.action == "run" and fresh.reclaimed


def test_a_new_claim_now_and_then_drops_expired_receipts(
    receipts: ReceiptStore, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """5 receipts expire, 1 stays live; the next new claim prunes (forced here) and only the live one stays."""
    for n in range(5):
        receipts.claim(ME, "afi.write", f"old{n}", {})
    clock.now += 23 * 3600
    receipts.claim(ME, "afi.write", "live", {})
    clock.now += 2 * 3600
    monkeypatch.setattr("afi.auth.receipts.secrets.randbelow", lambda _n: 0)
    receipts.claim(ME, "afi.write", "new", {})
    assert [receipts.status(ME, "afi.write", f"old{n}") for n in range(5)] == [None] * 5
    assert receipts.status(ME, "afi.write", "live") == receipts.status(ME, "afi.write", "new") == "running"


def race(url: str, keys: list[str], start: Any, out: Any) -> None:
    """One racer: for each key, claim it when every racer is at the start line (``fresh``); the winner
    ends its call as failed once every racer has tried; then all claim it again (``reclaim``) and that
    winner completes it. Each outcome goes to ``out`` as (key, phase, outcome)."""
    try:
        store = ReceiptStore(url)
        for key in keys:
            for phase in ("fresh", "reclaim"):
                start.wait(WAIT)
                claim = None
                try:
                    claim = store.claim(ME, "afi.write", key, {"path": f"/files/{key}"})
                    outcome = "reclaimed" if claim.reclaimed else "run"
                except Conflict as err:
                    outcome = "retry" if err.retry_after else "conflict"
                start.wait(WAIT)  # every racer has tried before the winner ends its call
                if claim is not None:
                    store.finish(claim, result={"key": key}, failed=phase == "fresh")
                out.put((key, phase, outcome))
    except BaseException as err:
        out.put(("", "error", repr(err)))
        start.abort()


@pytest.mark.parametrize("racers", ["threads", "processes"])
def test_claimers_of_one_key_at_once_never_both_run(store_url: str, racers: str) -> None:
    """4 racers (threads, or processes of their own) claim each of 5 keys at once, twice (160 claims):
    each time exactly one runs (first a new receipt, then the failed one reclaimed) and the other 3 are
    told to retry; afterwards each key replays the one completed call."""
    keys = [f"key-{n}" for n in range(5)]
    count = 4
    if racers == "threads":
        start: Any = threading.Barrier(count)
        out: Any = queue.Queue()
        workers: list[Any] = [threading.Thread(target=race, args=(store_url, keys, start, out)) for _ in range(count)]
    else:
        context = multiprocessing.get_context("spawn")
        start, out = context.Barrier(count), context.Queue()
        workers = [context.Process(target=race, args=(store_url, keys, start, out)) for _ in range(count)]
    for worker in workers:
        worker.start()
    try:
        outcomes = [out.get(timeout=WAIT * 2) for _ in range(count * len(keys) * 2)]
    finally:
        for worker in workers:
            worker.join(WAIT)
    assert [o for o in outcomes if o[1] == "error"] == []
    tally = Counter(outcomes)
    for key in keys:
        assert (tally[(key, "fresh", "run")], tally[(key, "fresh", "retry")]) == (1, 3), key
        assert (tally[(key, "reclaim", "reclaimed")], tally[(key, "reclaim", "retry")]) == (1, 3), key
        replay = ReceiptStore(store_url).claim(ME, "afi.write", key, {"path": f"/files/{key}"})
        assert replay.action == "replay" and replay.result == {"key": key}
    with open_database(store_url).read() as conn:
        assert conn.execute("SELECT count(*) FROM afi_receipts").fetchone()[0] == len(keys)
