"""Hostile paths into the past through HTTP (``afi serve``): ``/.afi/at/<t>/files``, ``…/sessions``,
``/history/files``. ``..``, encoded slashes, NUL, very long or odd instants (time zones at the edges,
out of range, lower-case, no time), offsets and lengths past the end, and the same instants as a
search's ``x-as-of`` and scope.

Every answer is a 2xx/3xx or a 4xx carrying an AfiError body; never a 5xx. Figures: the requests
tried, the answers by status, failures (zero).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from urllib.parse import quote

import httpx
import pytest

from afi.clients import LocalClient
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from tests.support.servers import AfiServer, start_afi_serve

OWNER = Caller(principal="local", space="default")

INSTANTS = [
    "{now}", "2026-12-01", "2026-12-01T10:00:00+14:00", "2026-12-01T10:00:00-12:00", "2026-12-01T10:00:00+23:59",
    "2026-12-01t10:00:00z", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "9999-12-31T23:59:59.999Z",
    "0000-01-01T00:00:00Z", "2026-13-45T99:99:99Z", "2026-12-01T10:00:00+99:00", "1" * 10_000,
    "2026-12-01T10:00:00Z" * 200,
    "..", ".", "%2e%2e", "now", "before", "2026-12-01T10:00:00\x00Z", "2026-12-01T10:00:00.123456789Z",
    "+2026-12-01T10:00:00Z", "-2026-12-01T10:00:00Z", "２０２６-12-01T10:00:00Z", "2026-W48-2", "1733040000",
]  # fmt: skip
TAILS = [
    "files", "files/docs", "files/docs/plan.txt", "files/docs/../../../etc/passwd", "files/..", "files/%2e%2e/x",
    "files/docs%2Fplan.txt", "files/docs/plan.txt/more", "files/\x00", "files/" + "a/" * 500 + "b",
    "files/" + "x" * 5000,
    "sessions", "sessions/s1.md", "sessions/..%2F..%2Fx.md", "sessions/../facts", "facts", "facts/deploy.md",
    "history", "nowhere", "",
]  # fmt: skip
HISTORY = [
    "/history/files", "/history/files/docs", "/history/files/docs/plan.txt", "/history/files/docs/plan.txt/{v}",
    "/history/files/docs/plan.txt/{v}/x", "/history/files/docs/plan.txt/9999-99-99T99:99:99.999Z",
    "/history/files/docs/plan.txt/{v}.deleted", "/history/files/docs/plan.txt/{v}~99999999999999999999",
    "/history/files/../../etc/passwd", "/history/files/%2e%2e/x", "/history/files/docs%2Fplan.txt",
    "/history/files/\x00", "/history/files/" + "z" * 5000, "/history/files/docs/plan.txt/" + "1" * 10_000,
]  # fmt: skip
READS = [(0, None), (10**12, None), (0, 10**18), (10**18, 10**18), (5, 0), (-1, None), (0, -5), (2**63, 2**63)]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AfiServer, str, str]]:
    base = tmp_path_factory.mktemp("time-attacks")
    provider = MemoryProvider(base / "afi.db", base / "files")
    client = LocalClient(provider, OWNER)
    client.write("/files/docs/plan.txt", b"first plan\n")
    client.write("/facts/deploy.md", b"we deploy on Mondays")
    provider.ledger_write(OWNER, "append", "s1", {"messages": [{"role": "user", "text": "hi", "entry_id": "m1"}]})
    time.sleep(0.02)
    now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    client.write("/files/docs/plan.txt", b"second plan\n")
    version = next(e.path for e in client.list("/history/files/docs/plan.txt").entries).rsplit("/", 1)[1]
    with start_afi_serve(base / "afi.db", base / "files", "--no-mcp") as server:
        yield server, now, version


def _check(answer: httpx.Response, what: str, failures: list[str]) -> None:
    if answer.status_code >= 500:
        failures.append(f"{what}: {answer.status_code} {answer.text[:200]}")
    elif answer.status_code >= 400 and ("code" not in answer.text or "Traceback" in answer.text):
        failures.append(f"{what}: {answer.status_code} without an AfiError: {answer.text[:200]}")


def _paths(now: str, version: str) -> list[str]:
    paths = [f"/.afi/at/{instant.format(now=now)}/{tail}".rstrip("/") for instant in INSTANTS for tail in TAILS[:3]]
    paths += [f"/.afi/at/{now}/{tail}".rstrip("/") for tail in TAILS]
    paths += [p.format(v=version) for p in HISTORY]
    return paths


def test_hostile_paths_into_the_past_are_4xx_never_5xx(served: tuple[AfiServer, str, str]) -> None:
    server, now, version = served
    failures: list[str] = []
    statuses: Counter[int] = Counter()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for path in _paths(now, version):
            for verb in ("stat", "list", "read"):
                answer = client.get(f"/afi/{verb}", params={"path": path})
                statuses[answer.status_code] += 1
                _check(answer, f"{verb} {path[:80]!r}", failures)
            raw = client.get(f"/afi/read?path={quote(path, safe='/%')}")  # percent signs passed through as typed
            statuses[raw.status_code] += 1
            _check(raw, f"raw read {path[:80]!r}", failures)
        for path in (f"/.afi/at/{now}/files/docs/plan.txt", f"/history/files/docs/plan.txt/{version}"):
            for offset, length in READS:
                params: dict[str, str | int] = {"path": path, "offset": offset}
                if length is not None:
                    params["length"] = length
                answer = client.get("/afi/read", params=params)
                statuses[answer.status_code] += 1
                _check(answer, f"read {path} at {offset}+{length}", failures)
                if answer.status_code == 200 and offset >= 12:
                    assert answer.content == b"", (path, offset, answer.content)
            for header in ("bytes=5-1", "bytes=999999999999-", "bytes=-0", "bytes=0-18446744073709551616"):
                answer = client.get("/afi/read", params={"path": path}, headers={"Range": header})
                statuses[answer.status_code] += 1
                _check(answer, f"read {path} Range {header}", failures)
        for instant in INSTANTS:
            at = instant.format(now=now)
            for body in (
                {"query": {"regex": "plan"}, "path": f"/.afi/at/{at}/files"},
                {"query": {"semantic": "plan"}, "path": "/facts", "x-as-of": at},
                {"query": "plan", "path": "/", "x-as-of": at},
                {"query": "hi", "path": f"/.afi/at/{at}/sessions"},
            ):
                answer = client.post("/afi/search", json=body)
                statuses[answer.status_code] += 1
                _check(answer, f"search {str(body)[:100]}", failures)
    tried = sum(statuses.values())
    print(f"{tried} hostile requests into the past: {dict(sorted(statuses.items()))}; {len(failures)} failures")
    assert failures == [], f"{tried} requests, {len(failures)} failures:\n" + "\n".join(failures[:40])


def test_a_past_version_reads_past_its_end_as_nothing(served: tuple[AfiServer, str, str]) -> None:
    server, now, _ = served
    with httpx.Client(base_url=server.url, timeout=60) as client:
        whole = client.get("/afi/read", params={"path": f"/.afi/at/{now}/files/docs/plan.txt"})
        assert whole.status_code == 200 and whole.content == b"first plan\n"
        tail = client.get("/afi/read", params={"path": f"/.afi/at/{now}/files/docs/plan.txt", "offset": 6})
        assert tail.content == b"plan\n" and tail.headers["x-afi-eof"] == "true"


def test_what_is_no_iso_instant_is_refused_not_read_as_one(served: tuple[AfiServer, str, str]) -> None:
    """Python's ISO parser takes "1" * 5000 as 1111-11-11 and a control character as the separator: an
    instant path reads only a string of ISO 8601's shape (found: both were served as some instant)."""
    server, _, _ = served
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for segment in (
            "1" * 5000,
            "2026-12-01T10:00:00\x01Z",
            "2026-12-01T10:00:00Z\x00",
            "2026-12-01T10:00:00+00:00Z",
        ):
            answer = client.get("/afi/list", params={"path": f"/.afi/at/{segment}/files"})
            assert answer.status_code == 400 and "invalid_path" in answer.text, (segment[:30], answer.text[:300])
        assert client.get("/afi/list", params={"path": "/.afi/at/20261201T100000Z/files"}).status_code == 200
