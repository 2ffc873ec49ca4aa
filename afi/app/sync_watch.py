"""``afi sync --watch``: keep two stores in step, a round now and then one every interval, until a
signal ends it.

A round is one sync (:func:`~afi.app.sync.sync_stores`'s work, over endpoints kept open between
rounds). A round that fails is reported and the next one starts at its time, from fresh connections:
a remote that is down, restarting or unreachable, a dropped connection, a busy store, a batch
refused are all retried. Two kinds of failure end the watch instead (exit 2, as a single sync):
one no retry can mend at any round (:data:`FATAL`: a key the remote does not know or that may not
sync, a remote that does not sync), and, in the first round, anything but an unreachable or busy
remote (:data:`RETRIED_AT_START`): a watch started wrong (a remote that is this store, a batch a
store refuses) says so at once instead of repeating it every interval.

SIGINT and SIGTERM end the watch where it is: between rounds at once, inside one by unwinding it, so
the batch being applied rolls back (each batch is one transaction with the peer's position, as for a
sync killed at any moment) and the next sync goes on from there.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from afi.errors import AfiError, Internal, InvalidPath

__all__ = [
    "DEFAULT_EVERY",
    "FATAL",
    "MAX_EVERY",
    "RETRIED_AT_START",
    "Round",
    "Stopped",
    "parse_every",
    "span",
    "stop_on_signals",
    "watch",
]

DEFAULT_EVERY = "30s"
MAX_EVERY = 7 * 86_400.0  # a week: a longer interval is a typo more often than a wish
# the codes a retry cannot mend: the watch ends on them (exit 2, as a single sync does) at any round
FATAL = frozenset({"unauthorized", "forbidden", "unsupported"})
# what a first round may fail with and be retried: a remote not up yet, or busy; the rest ends the watch
RETRIED_AT_START = frozenset({"internal", "rate_limited"})
_EVERY = re.compile(r"(?P<count>\d+(?:\.\d+)?)(?P<unit>[smh]?)")
_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_every(text: str) -> float:
    """Given an interval as written (``30s``, ``5m``, ``1h``, ``1.5m``, or bare seconds: ``45``), return
    its seconds; InvalidPath naming the forms for zero, a negative, more than a week, or anything else."""
    written = text.strip().lower()
    found = _EVERY.fullmatch(written.removeprefix("-"))
    if found is None:
        raise InvalidPath(f"{text!r} is not an interval: write 30s, 5m, 1h or a number of seconds")
    seconds = float(found["count"]) * _UNITS[found["unit"]]
    if written.startswith("-") or seconds <= 0:
        raise InvalidPath(f"{text!r} is no time to wait: a watch waits a while between syncs (e.g. 30s)")
    if seconds > MAX_EVERY:
        raise InvalidPath(f"{text!r} is more than a week (168h)")
    return seconds


def span(seconds: float) -> str:
    """Given seconds, return them as ``--every`` takes them: ``30s``, ``5m``, ``1h``, ``1.5s``."""
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


class Stopped(BaseException):
    """SIGINT or SIGTERM arrived: the watch unwinds and ends (a BaseException, so that no handler of
    errors in the code it passes through takes it for a failure)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`Stopped` in the main thread (once: a second
    signal while it unwinds is ignored, so a rollback is not cut short). A SIGINT ignored from the
    start (a background job of a shell) stays ignored."""
    wanted = [signal.SIGTERM]
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        wanted.append(signal.SIGINT)
    stopping = False

    def stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        raise Stopped(signum)

    before = {sig: signal.signal(sig, stop) for sig in wanted}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


@dataclass(frozen=True)
class Round:
    """One round of a watch: its number (from 1), when it started, and its report or its error."""

    number: int
    at: str
    report: Any = None  # a SyncReport
    error: AfiError | None = None
    after_failure: bool = False  # the round before this one failed


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def watch(run: Callable[[], Any], every: float, said: Callable[[Round], None], *,
          reset: Callable[[], None] = lambda: None) -> None:  # fmt: skip
    """Call ``run`` now and then every ``every`` seconds (from the start of one to the start of the next,
    at once when one ran longer), handing each round to ``said``; ``reset`` after a failed round (the
    next one starts from fresh connections). Returns never: it raises :class:`Stopped` on a signal
    (within :func:`stop_on_signals`), and the :class:`~afi.errors.AfiError` of a :data:`FATAL` failure
    or of a first round's failure other than :data:`RETRIED_AT_START`."""
    number, failed = 0, False
    while True:
        number += 1
        started, at = time.monotonic(), _now()
        try:
            report = run()
        except AfiError as err:
            if err.code in FATAL or (number == 1 and err.code not in RETRIED_AT_START):
                raise
            said(Round(number, at, error=err, after_failure=failed))
            failed = True
        except Exception as err:  # a driver's own error (a PostgreSQL that went away, a disk): the next round retries
            said(Round(number, at, error=Internal(f"{type(err).__name__}: {err}"), after_failure=failed))
            failed = True
        else:
            said(Round(number, at, report=report, after_failure=failed))
            failed = False
        if failed:
            reset()
        time.sleep(max(0.0, started + every - time.monotonic()))
