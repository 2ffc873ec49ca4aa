"""How a note version reads in ``/history`` and ``/.afi/at/<instant>/`` (:mod:`afi.providers.memory.tree.versions`),
on each engine: what it is at the instant read (active, superseded, expired, scheduled), without what
later writes gave it; and search finds exactly the lines a read shows, stat and list its size."""

from __future__ import annotations

import random
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from afi.model import RegexQuery, SearchRequest, SemanticQuery
from afi.provider import Caller
from afi.providers.memory.fabric.render import READ_ONLY_FIELDS, dump_field, parse_note, render_field, render_front
from afi.providers.memory.fabric.types import MemoryNote
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.tree.versions import Facts, Shown, shown, widening

OWNER = Caller(principal="local", space="default")
LATER = "2099-01-01T00:00:00.000Z"


def instant() -> str:
    time.sleep(0.01)  # versions are stamped to the millisecond
    moment = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    time.sleep(0.01)
    return moment


def _soon(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _front(text: str) -> dict[str, object]:
    loaded = yaml.safe_load(text.split("---\n")[1])
    assert isinstance(loaded, dict)
    return loaded


# -- the reading, line by line ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("note_id", "context"),
    [
        pytest.param("a1b2c3d4e5f6", None, id="ascii"),
        pytest.param("123456789012", None, id="digits-id-quoted"),
        pytest.param("0e1234567890", "Zürich, naïve — line one\nline two", id="unicode-multiline"),
    ],
)
def test_each_line_a_reading_edits_is_the_line_the_front_matter_holds(note_id: str, context: str | None) -> None:
    note = MemoryNote(id=note_id, kind="fact", name="n", content="body", ingested_at="2026-01-02T00:00:00.000Z",
                      created_at="2026-01-01T00:00:00.000Z", updated_at="2026-01-03T00:00:00.000Z",
                      valid_to="2026-01-03T00:00:00.000Z", token_count=1, context=context)  # fmt: skip
    front = render_front(note)
    for field in ("status", "valid_to", "ingested_at", "updated_at", "id"):
        assert "\n" + render_field(field, str(getattr(note, field))) in front, (field, front)
    stored = front + "body\n"
    for how in (
        Shown("superseded", note_id, (("updated_at", "2026-01-03T00:00:00.000Z"),)),
        Shown("expired"),
        Shown("scheduled", None, (("valid_to", note.valid_to or ""), ("ingested_at", note.ingested_at))),
    ):
        text = how.text(stored)
        assert how.size(len(stored.encode())) == len(text.encode()), (how, text)
        assert _front(text)["status"] == how.status and text.endswith("\n---\nbody\n")
        assert all(field not in _front(text) for field, _ in how.hidden)
        assert _front(text).get("superseded_by") == how.superseded_by
    # a version read from /history and written back as a note: its reading's fields are read-only
    assert "superseded_by" in READ_ONLY_FIELDS
    fields, content = parse_note(Shown("superseded", note_id).text(stored))
    assert content == "body" and "superseded_by" not in fields and "status" not in fields


def test_a_field_line_said_without_the_emitter_is_the_emitter_s() -> None:
    rng = random.Random(29)
    values = ["yes", "no", "on", "off", "true", "null", "nan", "y", "0", "00", "0777", "0123456789", "123456789012",
              "0b101", "1e10", "0e1234567890", "active", "superseded", "9999-12-31T23:59:59.999Z"]  # fmt: skip
    values += ["".join(rng.choice("0123456789abcdef" if rng.random() < 0.7 else "0123456789") for _ in range(n))
               for n in rng.choices([1, 2, 3, 4, 12], k=5000)]  # fmt: skip
    values += [f"{rng.randint(1, 9999):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:"
               f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}{rng.choice(['', '.1', '.123', '.123456'])}Z"
               for _ in range(1000)]  # fmt: skip
    differ = []
    for value in values:
        emitted = {yaml.dump({"superseded_by": value}, Dumper=dumper, sort_keys=False, allow_unicode=True, width=10**6)
                   for dumper in (yaml.SafeDumper, getattr(yaml, "CSafeDumper", yaml.SafeDumper))}  # fmt: skip
        if emitted != {render_field("superseded_by", value)} or dump_field("superseded_by", value) not in emitted:
            differ.append((value, emitted, render_field("superseded_by", value)))
    assert differ == [], f"{len(values)} values, {len(differ)} differ: {differ[:5]}"


def test_what_a_version_is_at_an_instant() -> None:
    start, written, cut, now = ("2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z", "2026-01-05T00:00:00.000Z",
                                "2026-02-01T00:00:00.000Z")  # fmt: skip
    before = "2026-01-03T00:00:00.000Z"  # after the first write, before the cut
    superseded = Facts(None, cut, written, cut, f"b1b2b3b4b5b6 {cut}")
    assert shown(superseded, now, past=False) == Shown("superseded", "b1b2b3b4b5b6")
    assert shown(superseded, before, past=True) == Shown("active", None, (("valid_to", cut), ("updated_at", cut)))
    assert shown(superseded, now, past=True) == Shown("superseded", "b1b2b3b4b5b6")
    restored_away = Facts(start, cut, written, cut, None)  # retired in place (a restore): no successor
    assert shown(restored_away, now, past=False) == Shown("expired")
    assert shown(restored_away, before, past=True) == Shown("active", None, (("valid_to", cut), ("updated_at", cut)))
    scheduled_end = Facts(None, LATER, written, None, None)  # an end written with the version stays
    assert shown(scheduled_end, before, past=True) == Shown("active")
    assert shown(Facts(None, cut, written, None, None), now, past=False) == Shown("expired")
    assert shown(Facts(LATER, None, written, None, None), now, past=False) == Shown("scheduled")
    resaved = Facts(None, None, cut, cut, None)  # a re-save moved ingested_at and updated_at after the instant
    assert shown(resaved, before, past=True) == Shown("active", None, (("ingested_at", cut), ("updated_at", cut)))
    # a successor held or forgotten is none: the version expired
    assert shown(Facts(None, cut, written, cut, None), now, past=False) == Shown("expired")


@pytest.mark.parametrize(
    ("literals", "expected"),
    [
        pytest.param(["zebra canary"], None, id="plain-text"),
        pytest.param(["status: active"], None, id="active-is-stored"),
        pytest.param(["zebra", "status: superseded"], (["zebra"], []), id="status-word"),
        pytest.param(["EXPIRED"], ([], []), id="case-folded"),
        pytest.param(["uperseded_by: 12"], ([], []), id="by-and-id"),
        pytest.param(["by: '1234"], ([], []), id="quoted-id"),
        pytest.param(["2026", "okapi"], (["okapi"], ["2026"]), id="hex-in-an-id"),
        pytest.param(["CAFE", "b1b2"], ([], ["cafe", "b1b2"]), id="hex-words"),
        pytest.param(["cafe", "superseded"], ([], []), id="hex-and-status"),
        pytest.param(["123456789012345678901"], None, id="longer-than-an-id"),
    ],
)
def test_which_literals_a_reading_may_add(literals: list[str], expected: tuple[list[str], list[str]] | None) -> None:
    assert widening(literals) == expected


# -- through the provider, on each engine ------------------------------------------------------------


@pytest.fixture
def story(tmp_path: Path, store_url: str) -> Iterator[tuple[MemoryProvider, list[str], list[str]]]:
    """A chain of four versions, an end that passes, an end written with a note, a version scheduled
    for later, a note a restore retired, a version whose successor's id is all digits; the instants
    between the writes."""
    provider = MemoryProvider(store_url, tmp_path / "files")
    marks: list[str] = []
    ends = [LATER]  # the ends notes were written with
    provider.write(OWNER, "/facts/scheduled-end.md", f"---\nvalid_to: '{LATER}'\n---\nkept until 2099".encode())
    fabric = provider._space("default").fabric
    fabric.remember(kind="fact", name="later", content="not yet", valid_from=LATER)
    for n in range(4):
        provider.write(OWNER, "/facts/chain.md", f"version {n} of the chain, cafe 2026".encode())
        ends.append(_soon(0.3))
        provider.write(OWNER, "/facts/brief.md", f"---\nvalid_to: '{ends[-1]}'\n---\nbrief {n}".encode())
        marks.append(instant())
    provider.write(OWNER, "/facts/retired.md", b"written after the third instant")
    time.sleep(0.4)
    marks.append(instant())
    provider.space_restore(OWNER, marks[2])
    first = fabric.remember(kind="fact", name="digits", content="first", id="0a0a0a0a0a0a")
    fabric.remember(kind="fact", name="digits", content="second", id="123456789012", supersedes=first.id)
    marks.append(instant())
    yield provider, marks, ends


def _search(provider: MemoryProvider, query: str | RegexQuery, path: str) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    cursor = None
    while True:
        page = provider.search(OWNER, SearchRequest(query=query, path=path, limit=50, cursor=cursor))
        found += [(m.path, m.line) for m in page.matches]
        cursor = page.next_cursor
        if cursor is None:
            return found


def _texts(provider: MemoryProvider, folder: str) -> dict[str, str]:
    """Every version a folder lists, read; its listed and stat sizes and times are the text's."""
    texts = {}
    for entry in provider.list(OWNER, folder, limit=1000).entries:
        result = provider.read(OWNER, entry.path)
        stat = provider.stat(OWNER, entry.path)
        assert entry.size == stat.size == len(result.data), (entry, stat, result.data)
        assert entry.mtime == stat.mtime and entry.etag == stat.etag == result.etag, (entry, stat)
        texts[entry.path] = result.data.decode()
    return texts


def test_search_finds_exactly_the_lines_a_read_shows(story: tuple[MemoryProvider, list[str], list[str]]) -> None:
    provider, marks, _ = story
    history = _texts(provider, "/history")
    words = {str(_front(text)["status"]) for text in history.values()}
    assert words == {"active", "superseded", "expired", "scheduled"}, words
    digits = next(text for text in history.values() if "first" in text.split("---\n", 2)[2])
    assert "\nsuperseded_by: '123456789012'\n" in digits, digits
    views = ["/history", *(f"/.afi/at/{m}/{area}" for m in marks for area in ("history", "facts"))]
    ids = [str(_front(text)["id"]) for text in history.values()]
    queries: list[str | RegexQuery] = ["status: superseded", "status: expired", "status: scheduled", "status: active",
                                       "superseded_by", "valid_to", "updated_at", "ingested_at", "cafe", "2026",
                                       "3456", "by: '1234", RegexQuery(regex=r"^superseded_by: '?[0-9a-f]{20}'?$"),
                                       RegexQuery(regex=r"^(valid_to|updated_at): '20")]  # fmt: skip
    queries += ids + [i[3:8] for i in ids]
    cases, failures = 0, []
    for view in views:
        texts = history if view == "/history" else _texts(provider, view)
        for query in queries:
            needle = query.regex if isinstance(query, RegexQuery) else None
            expected = sorted(
                (path, n)
                for path, text in texts.items()
                for n, line in enumerate(text.split("\n")[:-1], 1)
                if (needle is None and str(query) in line) or (needle is not None and _re_search(needle, line))
            )
            cases += 1
            if sorted(_search(provider, query, view)) != expected:
                failures.append((view, query, expected, sorted(_search(provider, query, view))))
    assert failures == [], f"{cases} searches, {len(failures)} failures: {failures[:3]}"
    assert cases >= 300, cases


def _re_search(pattern: str, line: str) -> bool:
    return re.search(pattern, line) is not None


def test_an_instant_shows_no_time_after_it(story: tuple[MemoryProvider, list[str], list[str]]) -> None:
    provider, marks, ends = story
    checked = 0
    for mark in marks:
        for area in ("history", "facts"):
            for path, text in _texts(provider, f"/.afi/at/{mark}/{area}").items():
                front = _front(text)
                later = {k: v for k, v in front.items() if k.endswith(("_at", "valid_to")) and str(v) > mark}
                kept = later.pop("valid_to", None)
                assert later == {} and kept in (None, *ends), (mark, path, text)
                assert provider.stat(OWNER, path).mtime <= mark
                checked += 1
    assert checked >= 20, checked


def test_semantic_hits_are_numbered_in_the_text_a_read_shows(
    story: tuple[MemoryProvider, list[str], list[str]],
) -> None:
    provider, marks, _ = story
    checked = 0
    for scope in ("/history", *(f"/.afi/at/{m}/{area}" for m in marks[1:3] for area in ("history", "facts"))):
        request = SearchRequest(query=SemanticQuery(semantic="version of the chain"), path=scope, limit=50)
        for match in provider.search(OWNER, request).matches:
            lines = provider.read(OWNER, match.path).data.decode().split("\n")
            assert lines[match.line - 1].startswith(match.text.rstrip("…")), (scope, match, lines)
            checked += 1
    assert checked >= 5, checked
