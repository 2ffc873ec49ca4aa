from __future__ import annotations

import threading

import pytest

from afi.auth.ratelimit import RateLimiter
from afi.errors import RateLimited


class Clock:
    """A clock the test moves by hand, so no test waits on real time."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_passes_then_the_next_call_is_limited_with_retry_after() -> None:
    clock = Clock()
    limiter = RateLimiter(2.0, 3, clock=clock)
    for _ in range(3):
        limiter.check("alice")
    with pytest.raises(RateLimited) as caught:
        limiter.check("alice")
    assert caught.value.retry_after == pytest.approx(0.5)
    assert caught.value.to_dict()["code"] == "rate_limited"


def test_waiting_retry_after_lets_exactly_one_more_call_through() -> None:
    clock = Clock()
    limiter = RateLimiter(1.0, 1, clock=clock)
    limiter.check("k")
    with pytest.raises(RateLimited) as caught:
        limiter.check("k")
    assert caught.value.retry_after is not None
    clock.now += caught.value.retry_after
    limiter.check("k")
    with pytest.raises(RateLimited):
        limiter.check("k")


def test_tokens_refill_but_never_above_the_burst() -> None:
    clock = Clock()
    limiter = RateLimiter(10.0, 2, clock=clock)
    limiter.check("k")
    limiter.check("k")
    clock.now += 3600
    limiter.check("k")
    limiter.check("k")
    with pytest.raises(RateLimited):
        limiter.check("k")


def test_keys_have_their_own_buckets() -> None:
    limiter = RateLimiter(1.0, 1, clock=Clock())
    limiter.check("principal:a")
    limiter.check("principal:b")
    with pytest.raises(RateLimited):
        limiter.check("principal:a")


def test_threads_never_spend_more_than_the_burst() -> None:
    limiter = RateLimiter(0.001, 100, clock=Clock())
    passed: list[int] = []
    lock = threading.Lock()

    def hammer() -> None:
        ok = 0
        for _ in range(50):
            try:
                limiter.check("shared")
                ok += 1
            except RateLimited:
                pass
        with lock:
            passed.append(ok)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(passed) == 100


def test_memory_is_bounded_and_idle_keys_are_dropped_first() -> None:
    clock = Clock()
    limiter = RateLimiter(1.0, 2, max_keys=10, clock=clock)
    limiter.check("busy")
    limiter.check("busy")
    for i in range(50):
        limiter.check(f"idle-{i}")
    assert len(limiter._buckets) <= 10
    with pytest.raises(RateLimited):
        limiter.check("busy")


@pytest.mark.parametrize(("rate", "burst"), [(0, 1), (-1, 1), (float("inf"), 1), (1, 0)])
def test_nonsense_limits_fail_loudly(rate: float, burst: int) -> None:
    with pytest.raises(ValueError):
        RateLimiter(rate, burst)


def test_describe_is_what_the_manifest_shows() -> None:
    assert RateLimiter(5, 20).describe() == {"per_second": 5.0, "burst": 20, "keyed_by": "principal or address"}
