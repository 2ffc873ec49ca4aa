"""A clock the tests set by hand (for receipts, rate limits and anything else that reads the time)."""

from __future__ import annotations


class Clock:
    """Epoch seconds that move only when a test moves them (``clock.now += 60``)."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now
