"""Test files run longest first, from the seconds each took in a recorded run (``tests/durations.json``).

``make test`` hands whole files to its workers (``--dist loadfile``) in collection order; a long file
handed out last keeps one worker busy while the other waits. Sorted longest first, the short files
fill in around the long ones and both workers finish close together. Refresh the record after adding
or reshaping long tests: ``make test PYTEST_ARGS=--record-durations`` (files a run did not reach keep
their old figure).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

RECORD = Path(__file__).resolve().parents[1] / "durations.json"
# A file the record does not know yet: one holding a ``slow`` test is taken for a long one.
UNRECORDED_SLOW_SECONDS = 60.0


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def recorded() -> dict[str, float]:
    """Seconds by test file (a path relative to the repository), or nothing when there is no record."""
    try:
        return {str(name): float(seconds) for name, seconds in json.loads(RECORD.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def longest_files_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` by their file's recorded seconds, longest first, each file kept whole and in order."""
    seconds = recorded()
    slow = {_file_of(item.nodeid) for item in items if item.get_closest_marker("slow") is not None}

    def file_seconds(item: pytest.Item) -> float:
        name = _file_of(item.nodeid)
        return seconds.get(name, UNRECORDED_SLOW_SECONDS if name in slow else 0.0)

    items.sort(key=lambda item: -file_seconds(item))  # a stable sort: the tests of a file keep their order


class DurationRecorder:
    """Sums each file's setup, call and teardown seconds over a run and merges them into the record."""

    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[_file_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not self.seconds:
            return
        merged = recorded() | {name: round(total, 1) for name, total in self.seconds.items()}
        ordered = dict(sorted(merged.items(), key=lambda pair: (-pair[1], pair[0])))
        RECORD.write_text(json.dumps(ordered, indent=1) + "\n")
