"""A thread-safe token bucket per key (a principal or an address), shared by every binding.

Each key holds up to ``burst`` tokens, refilled at ``rate`` tokens per second; a call spends one.
An empty bucket raises :class:`~afi.errors.RateLimited` whose ``retry_after`` is the time until one
token is back, so a client that waits that long succeeds.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import RateLimited

__all__ = ["RateLimiter"]


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """Given a rate (tokens per second) and a burst size, limit calls per key.

    Args:
        rate: tokens added per second (> 0).
        burst: bucket size, the most calls a fresh key may make at once (>= 1).
        max_keys: buckets kept at most; the fullest (idle) ones are dropped first, which
            forgets nothing a limited key would need.
        clock: a monotonic clock, in seconds.
    """

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate <= 0 or not math.isfinite(rate):
            raise ValueError("rate must be a positive number of tokens per second")
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self.rate = float(rate)
        self.burst = int(burst)
        self._max_keys = max_keys
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}

    def check(self, key: str) -> None:
        """Spend one token of ``key``'s bucket.

        Raises:
            RateLimited: the bucket is empty; ``retry_after`` is the seconds until a token is back.
        """
        with self._lock:
            now = self._clock()
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) >= self._max_keys:
                    self._evict(now)
                bucket = self._buckets[key] = _Bucket(float(self.burst), now)
            else:
                bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.stamp) * self.rate)
                bucket.stamp = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return
            wait = (1.0 - bucket.tokens) / self.rate
        raise RateLimited(
            f"too many requests; retry in {wait:.2f} s (limit: {self.rate:g}/s, burst {self.burst})",
            retry_after=round(max(wait, 0.001), 3),
        )

    def wait(self, key: str) -> float:
        """Return the seconds until ``key``'s bucket holds a token (0 when it holds one now), spending none."""
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                return 0.0
            tokens = min(float(self.burst), bucket.tokens + (self._clock() - bucket.stamp) * self.rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def describe(self) -> dict[str, Any]:
        """Return the limit as the manifest's ``x-limits.rate`` shows it."""
        return {"per_second": self.rate, "burst": self.burst, "keyed_by": "principal or address"}

    def _evict(self, now: float) -> None:
        def level(item: tuple[str, _Bucket]) -> float:
            return item[1].tokens + (now - item[1].stamp) * self.rate

        for key, _ in sorted(self._buckets.items(), key=level, reverse=True)[: max(1, self._max_keys // 10)]:
            del self._buckets[key]
