"""Grep over documents read a piece at a time (issue 29): pieces, long lines, stops and bytes that are
not text give the lines, columns and texts a whole-document, line-by-line search gives; a file is
never held whole; workspace files of any size, binary ones too, are searched; a page the budget cut
short says so in ``x-truncated``.

The random cases are seeded, so a failure names a case that replays.
"""

from __future__ import annotations

import itertools
import random
import tracemalloc
from pathlib import Path

import pytest

import afi.providers.memory.search.grep as grep_module
import afi.providers.memory.search.scan as scan_module
from afi.errors import InvalidPath
from afi.model import MatchPage, RegexQuery, SearchRequest
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.search.grep import GrepLimits
from afi.providers.memory.search.lines import LineHit, RegexFinder, Spot, Stop, SubstringFinder, chars, cut
from afi.providers.memory.search.scan import BytesDoc, FileDoc, scan
from afi.regex import Budget, compile_regex

OWNER = Caller(principal="local", space="default")
ALPHABET = [b"a", b"b", b"x", b" ", b".", b"\n", b"\n", "é".encode(), b"\x00", b"\xff", b"\xe2\x82"]
PATTERNS = ["ab", "a.b", r"\bx", "x$", "^a", r"a\s*b", "é+", "[^a]b", r"\Ab", r"b\z", "(?s)a.b", "x{3}"]


def _document(rng: random.Random) -> bytes:
    """Short lines, and now and then a line longer than the pieces it is read in."""
    parts = []
    for _ in range(rng.randint(1, 12)):
        run = rng.choice([rng.randint(0, 6), rng.randint(0, 6), rng.randint(20, 90)])
        parts.append(b"".join(rng.choice(ALPHABET[:5] + ALPHABET[6:]) for _ in range(run)))
    return b"\n".join(parts) + rng.choice([b"", b"\n"])


Hit = tuple[int, int, str, object]  # line, column, text, context (before and after, or None)


def _expected(doc: bytes, test: RegexFinder | SubstringFinder, context: int = 0) -> list[Hit]:
    """grep, by hand: each line of the bytes on its own."""
    lines = doc.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    shown = [cut(line.decode("utf-8", "replace"), 0) for line in lines]
    found: list[Hit] = []
    for number, line in enumerate(lines, start=1):
        at = test.within(line, 0, len(line), Budget())
        assert isinstance(at, int)
        if at >= 0:
            near = (shown[max(0, number - 1 - context) : number - 1], shown[number : number + context])
            text = cut(line.decode("utf-8", "replace"), chars(line[:at]))
            found.append((number, chars(line[:at]) + 1, text, near if context else None))
    return found


def _make(pattern: str, regex: bool) -> RegexFinder | SubstringFinder:
    """A new finder (a regex finder's block size changes as it goes)."""
    return RegexFinder(compile_regex(pattern)) if regex else SubstringFinder(pattern)


def _scanned(doc: bytes, finder: RegexFinder | SubstringFinder, max_bytes: float, context: int = 0) -> list[Hit]:
    """Every hit of a scan that a budget of ``max_bytes`` stops again and again, resumed each time."""
    found: list[Hit] = []
    spot, stops = Spot(0, 0), 0
    while True:
        last = None
        for hit in scan(BytesDoc(doc), finder, Budget(max_bytes=max_bytes), spot, context):
            last = hit
            if isinstance(hit, LineHit):
                near = (hit.context.before, hit.context.after) if hit.context else None
                found.append((hit.line, hit.column, hit.text, near))
        if not isinstance(last, Stop):
            return found
        assert (last.spot.at, last.spot.col) != (spot.at, spot.col), "a stop must make progress"
        spot, stops = last.spot, stops + 1
        assert stops < 10_000


@pytest.mark.parametrize("chunk", [1, 3, 7, 16, 64])
def test_pieces_and_stops_find_what_a_line_by_line_search_finds(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """1,500 random documents (with NUL, invalid UTF-8, é, lines longer than a piece) × a pattern,
    read in pieces of ``chunk`` bytes, whole (with two lines of context) and stopped by a budget of 1
    and 9 bytes: the same (line, column, text, context) as each line matched on its own."""
    monkeypatch.setattr(scan_module, "CHUNK", chunk)
    monkeypatch.setattr(scan_module, "TAIL", 4)
    rng = random.Random(chunk)
    cases = differences = hits = 0
    for case in range(1500):
        doc = _document(rng)
        regex = case % 3 > 0
        pattern = rng.choice(PATTERNS) if regex else rng.choice(["ab", "x", "é", "b\x00", "xx"])
        expected = _expected(doc, _make(pattern, regex))
        hits += len(expected)
        cases += 3
        differences += _scanned(doc, _make(pattern, regex), float("inf"), 2) != _expected(doc, _make(pattern, regex), 2)
        differences += sum(_scanned(doc, _make(pattern, regex), budget) != expected for budget in (1, 9))
    print(f"chunk {chunk}: {cases} cases, {hits} matching lines, {differences} differences")
    assert hits > 1000
    assert differences == 0


def test_a_long_line_keeps_its_columns_text_and_context_across_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_module, "CHUNK", 4096)
    line = "é" * 10_000 + "needle" + "y" * 10_000
    doc = f"one\ntwo\n{line}\nthree\nfour\n".encode()
    hits = [h for h in scan(BytesDoc(doc), SubstringFinder("needle"), Budget(), Spot(0, 0), context=2)]
    assert len(hits) == 1 and isinstance(hits[0], LineHit)
    hit = hits[0]
    assert (hit.line, hit.column, hit.text) == (3, 10_001, cut(line, 10_000))
    assert hit.context is not None and (hit.context.before, hit.context.after) == (["one", "two"], ["three", "four"])
    assert hit.after == Spot(3, len(f"one\ntwo\n{line}\n".encode()))


def test_a_file_is_read_a_piece_at_a_time(tmp_path: Path) -> None:
    """A 64 MiB file scanned to its end: the memory held at its peak stays within a few pieces."""
    big = tmp_path / "big.log"
    with big.open("wb") as out:
        for _ in range(64):
            out.write(b"hay and more hay\n" * ((1 << 20) // 17))
        out.write(b"the needle\n")
    with big.open("rb") as f:
        doc = FileDoc(f.fileno(), big.stat().st_size)
        tracemalloc.start()
        try:
            hits = [h for h in scan(doc, SubstringFinder("needle"), Budget(), Spot(0, 0)) if isinstance(h, LineHit)]
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert [(h.line, h.column) for h in hits] == [(64 * ((1 << 20) // 17) + 1, 5)]
    assert peak < 8 << 20, f"{peak:,} bytes held at the peak"


# -- through the provider ---------------------------------------------------------------------------


@pytest.fixture
def provider(provider: MemoryProvider, tmp_path: Path) -> MemoryProvider:
    """Big, binary and non-UTF-8 files put on disk, beside a small one written through the provider;
    on SQLite, then on PostgreSQL."""
    made = provider
    made.write(OWNER, "/files/small.txt", b"a needle in a small file\n")
    root = tmp_path / "files" / "default"
    (root / "big").mkdir(parents=True)
    (root / "big" / "two-mib.log").write_bytes(b"hay\n" * (1 << 19) + b"the needle, at the end\n")
    (root / "big" / "one-line.log").write_bytes(b"x" * (3 << 20) + b"needle" + b"y" * 100)
    (root / "tool.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00needle\x00\n\xff\xfeneedle\n")
    (root / "latin1.txt").write_bytes("caf\xe9 needle\n".encode("latin-1"))
    return made


def _all(provider: MemoryProvider, query: str | RegexQuery, path: str = "/files") -> tuple[list[MatchPage], list]:
    pages: list[MatchPage] = []
    cursor = None
    while True:
        page = provider.search(OWNER, SearchRequest(query=query, path=path, limit=1000, cursor=cursor))
        pages.append(page)
        if not page.next_cursor:
            return pages, [(m.path, m.line, m.column) for p in pages for m in p.matches]
        cursor = page.next_cursor


FOUND = [
    ("/files/big/one-line.log", 1, (3 << 20) + 1),
    ("/files/big/two-mib.log", (1 << 19) + 1, 5),
    ("/files/latin1.txt", 1, 6),
    ("/files/small.txt", 1, 3),
    ("/files/tool.bin", 1, 10),
    ("/files/tool.bin", 2, 3),
]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("needle", FOUND),
        (RegexQuery(regex=r"ne+dle"), FOUND),
        (RegexQuery(regex=r"\bneedle"), FOUND[1:]),  # x before it in one-line.log; NUL, é, ÿ are not word bytes
    ],
    ids=str,
)
def test_files_past_the_index_binary_and_not_utf8_are_searched(
    provider: MemoryProvider, query: str | RegexQuery, expected: list[tuple[str, int, int]]
) -> None:
    assert _all(provider, query)[1] == expected


def test_a_binary_match_shows_its_line_with_replacement_characters(provider: MemoryProvider) -> None:
    page = provider.search(OWNER, SearchRequest(query="needle", path="/files/tool.bin"))
    assert [m.text for m in page.matches] == ["\x7fELF\x02\x01\x01\x00\x00needle\x00", "\ufffd\ufffdneedle"]
    one = provider.search(OWNER, SearchRequest(query="needle", path="/files/big/one-line.log"))
    assert one.matches[0].text == "…" + "x" * 148 + "needle" + "y" * 100  # 255 characters, as any cut line


def test_a_page_the_budget_cut_short_says_where_and_what_is_left(
    provider: MemoryProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole, found = _all(provider, "needle")
    assert len(whole) == 1 and whole[0].x_truncated is None
    monkeypatch.setattr(grep_module, "GREP_LIMITS", GrepLimits(seconds=60, scan_bytes=1 << 20))
    pages, cut_found = _all(provider, "needle")
    assert cut_found == found
    first = pages[0].x_truncated
    assert first is not None and pages[0].matches == [] and pages[0].next_cursor
    assert (first.reason, first.path, first.line, first.remaining) == ("bytes", "/files/big/one-line.log", 0, 5)
    assert first.offset >= 1 << 20
    assert all(p.x_truncated is not None for p in pages[:-1]) and pages[-1].x_truncated is None
    reached = [(p.x_truncated.path, p.x_truncated.offset) for p in pages if p.x_truncated is not None]
    steps = [b - a for (x, a), (y, b) in itertools.pairwise(reached) if x == y]
    assert len(pages) >= 5 and steps and max(steps) <= (2 << 20) + 4096  # the budget, and one piece past it


def test_a_forged_byte_or_column_in_a_cursor_is_refused_or_harmless(provider: MemoryProvider) -> None:
    import base64
    import json

    def cursor(position: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps({"k": "grep", **position}).encode()).decode()

    for position in (
        {"p": "/files/tool.bin", "l": 0, "b": -1},
        {"p": "/x", "l": 0, "c": "1"},
        {"p": "/x", "l": 0, "s": True},
    ):
        with pytest.raises(InvalidPath, match="cursor"):
            provider.search(OWNER, SearchRequest(query="needle", path="/files", cursor=cursor(position)))
    for position in ({"p": "/files/tool.bin", "l": 0, "b": 2**62}, {"p": "/files/tool.bin", "l": 5, "b": 3, "c": 2**40},
                     {"p": "/files/tool.bin", "l": 1, "b": 7, "s": 1}):  # fmt: skip
        page = provider.search(OWNER, SearchRequest(query="needle", path="/files", cursor=cursor(position)))
        assert all(m.path >= "/files/tool.bin" for m in page.matches)
