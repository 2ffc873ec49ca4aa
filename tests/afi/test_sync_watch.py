"""The watch's own rules, in-process (the command itself, its processes and signals between them:
tests/cli/test_sync_watch_cli.py): the intervals ``--every`` takes and refuses, which failures a
round survives and which end the watch, and a signal ending it with the handlers put back."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from afi.app.sync_watch import FATAL, RETRIED_AT_START, Round, Stopped, parse_every, span, stop_on_signals, watch
from afi.errors import ERROR_CODES, AfiError, Conflict, Internal, InvalidPath, RateLimited, error_from_dict


@pytest.mark.parametrize(
    ("written", "seconds"),
    [("30s", 30), ("5m", 300), ("1h", 3600), ("45", 45), ("1.5m", 90), ("0.3", 0.3), (" 5M ", 300), ("168h", 604800)],
)
def test_intervals_as_users_write_them(written: str, seconds: float) -> None:
    assert parse_every(written) == pytest.approx(seconds)
    assert parse_every(span(parse_every(written))) == pytest.approx(seconds)  # what the watch says it reads back


@pytest.mark.parametrize(
    ("written", "message"),
    [
        ("0", "no time to wait"), ("0s", "no time to wait"), ("0.0h", "no time to wait"), ("-5", "no time to wait"),
        ("-1m", "no time to wait"), ("", "not an interval"), ("soon", "not an interval"), ("1h30m", "not an interval"),
        ("2d", "not an interval"), ("5 m", "not an interval"), ("1e3", "not an interval"), ("inf", "not an interval"),
        ("nan", "not an interval"), ("--5", "not an interval"), ("169h", "more than a week"),
        ("604801", "more than a week"),
    ],
)  # fmt: skip
def test_intervals_that_are_not_one_are_refused(written: str, message: str) -> None:
    with pytest.raises(InvalidPath, match=message):
        parse_every(written)


def test_span_says_an_interval_in_its_largest_whole_unit() -> None:
    assert [span(s) for s in (30, 90, 300, 3600, 5400, 0.3)] == ["30s", "90s", "5m", "1h", "90m", "0.3s"]


def _scripted(*steps: Any) -> tuple[Callable[[], Any], list[Round], list[str]]:
    """A round function that returns or raises each step in turn, then stops the watch (a SIGTERM);
    the rounds the watch reports, and the resets it asked for."""
    rounds: list[Round] = []
    log: list[str] = []
    left = list(steps)

    def run() -> Any:
        if not left:
            raise Stopped(signal.SIGTERM)
        step = left.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step

    return run, rounds, log


def _watch(*steps: Any) -> tuple[list[Round], list[str]]:
    run, rounds, log = _scripted(*steps)
    with pytest.raises(Stopped):
        watch(run, 0.001, rounds.append, reset=lambda: log.append("reset"))
    return rounds, log


def test_a_failed_round_is_reported_and_the_next_one_starts_fresh() -> None:
    rounds, log = _watch("first", Internal("cannot reach x"), RateLimited("busy", retry_after=1.0), "fourth",
                         OSError("disk gone"), "sixth")  # fmt: skip
    assert [r.number for r in rounds] == [1, 2, 3, 4, 5, 6]
    assert [r.report for r in rounds] == ["first", None, None, "fourth", None, "sixth"]
    assert [r.error.code if r.error else None for r in rounds] == [None, "internal", "rate_limited", None,
                                                                    "internal", None]  # fmt: skip
    assert rounds[4].error is not None and rounds[4].error.message == "OSError: disk gone"
    assert [r.after_failure for r in rounds] == [False, False, True, True, False, True]
    assert log == ["reset", "reset", "reset"]


@pytest.mark.parametrize("code", sorted(FATAL))
def test_a_failure_no_retry_mends_ends_the_watch_at_any_round(code: str) -> None:
    run, rounds, _ = _scripted("first", Internal("down"), error_from_dict({"code": code, "message": "no"}))
    with pytest.raises(AfiError) as ended:
        watch(run, 0.001, rounds.append)
    assert ended.value.code == code and len(rounds) == 2


@pytest.mark.parametrize("code", sorted(set(ERROR_CODES) - RETRIED_AT_START))
def test_a_first_round_fails_the_watch_unless_the_remote_is_only_down_or_busy(code: str) -> None:
    run, rounds, _ = _scripted(error_from_dict({"code": code, "message": "no", "retry_after": 1}))
    with pytest.raises(AfiError):
        watch(run, 0.001, rounds.append)
    assert rounds == []


def test_later_rounds_survive_what_would_end_a_first_one() -> None:
    rounds, _ = _watch("first", InvalidPath("a batch refused"), Conflict("a folder is here"), "fourth")
    assert [r.error.code if r.error else r.report for r in rounds] == ["first", "invalid_path", "conflict", "fourth"]


@pytest.fixture
def interruptible() -> Any:
    """SIGINT raising KeyboardInterrupt in this process, as in an ``afi`` started from a shell (a
    test runner may have it ignored); put back after."""
    held = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, held)


def test_sigterm_and_sigint_stop_a_watch_and_the_handlers_are_put_back(interruptible: None) -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in (signal.SIGTERM, signal.SIGINT):
        rounds: list[Round] = []

        def run(sig: int = sig, rounds: list[Round] = rounds) -> str:
            if len(rounds) == 2:
                os.kill(os.getpid(), sig)  # arrives in the third round: it unwinds from there
            return "moved"

        with pytest.raises(Stopped) as stopped, stop_on_signals():
            watch(run, 0.001, rounds.append)
        assert stopped.value.signum == sig and str(stopped.value) == signal.Signals(sig).name
        assert len(rounds) == 2
        assert {s: signal.getsignal(s) for s in before} == before


def test_a_signal_between_rounds_ends_the_wait_at_once() -> None:
    rounds: list[Round] = []
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(Stopped), stop_on_signals():
            watch(lambda: "moved", 600, rounds.append)  # waiting ten minutes for the second round
    finally:
        timer.cancel()
    assert len(rounds) == 1 and time.monotonic() - started < 30


def test_a_sigint_ignored_from_the_start_stays_ignored() -> None:
    held = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a background job of a shell starts so
    try:
        with stop_on_signals():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert callable(signal.getsignal(signal.SIGTERM))
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, held)
