"""afi.regex and the search budget: translation to RE2, literals, refusals, windows, list globs capped, paging.

The random cases are seeded, so a failure names a case that replays.
"""

from __future__ import annotations

import random

import pytest

import afi.providers.memory.search.grep as search_module
from afi.errors import InvalidPath, TooLarge
from afi.model import RegexQuery, SearchRequest
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.search.grep import GrepLimits
from afi.providers.memory.search.lines import LineHit, RegexFinder, Spot, SubstringFinder
from afi.providers.memory.search.scan import BytesDoc, scan
from afi.regex import (
    MAX_NESTING,
    MAX_PATTERN_CHARS,
    OVERLAP,
    WINDOW,
    Budget,
    Paused,
    check_query,
    compile_regex,
)

OWNER = Caller(principal="local", space="default")


@pytest.mark.parametrize(
    ("pattern", "literals"),
    [
        (r"(?<unit>metric) units", ["metric units"]),
        (r"abc(def)ghi", ["abcdefghi"]),
        (r"(?:abc)xyz", ["abcxyz"]),
        (r"ab+cde", ["cde"]),  # the repeated b ends the run, and takes its a with it
        (r"abc|def", []),
        (r"(abc|x)yz", []),
        (r"[[:alpha:]]xyz", ["xyz"]),  # sre_parse reads this as a class then "]xyz"
        (r"\Q(abc)\Exyz", ["xyz"]),
        (r"\u0055ser", ["User"]),
        (r"a\.b\-c d", ["a.b-c d"]),
        (r"foo{2}bar", ["bar"]),
        (r"foo{,2}bar", ["foo{,2}bar"]),  # not a repeat in RE2: literal braces
        (r"x*?abcd(?i)efg", ["abcd", "efg"]),
    ],
)
def test_literals_every_match_must_contain(pattern: str, literals: list[str]) -> None:
    assert compile_regex(pattern).literals == literals


_PIECES = ["a", "b", "ab", "ba", "aba", ".", "[ab]", "[^a]", "\\.", "(", ")", "(?:", "(?<n>", "|", "*", "+", "?", "{2}"]
_PIECES += ["{1,3}", "*?", "\\w", "\\b", "^", "$", "[[:alpha:]]", "\\Qa.b\\E", "(?i)", "A", "\\u0061"]
_PIECES += ["\\x41", "\\x{62}", "\\p{Latin}", "\\pL", "\\PN", "\\0", "\\x{2e}", "{", "}", "1", "\\u{41}"]
_PIECES += ["[]a]", "[^]a]", "[[:digit:]]", "\\Qb", "(?i:", "(?s)", "\\", "\\{", "\\}", "{2,}", "(?P<m>"]


def test_no_literal_is_claimed_that_a_matching_line_lacks() -> None:
    """3,000 random patterns × 40 random lines: wherever RE2 matches, every literal is in the line."""
    rng = random.Random(11)
    tried = matched = failures = 0
    for _ in range(3000):
        pattern = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 9)))
        try:
            regex = compile_regex(pattern)
        except InvalidPath:
            continue
        tried += 1
        for _ in range(40):
            line = "".join(rng.choice("aab.AB {}1") for _ in range(rng.randint(0, 14)))
            if regex.find(line) >= 0:
                matched += 1
                failures += any(lit.lower() not in line.lower() for lit in regex.literals)
    print(f"{tried} patterns compiled, {matched} matching lines, {failures} failures")
    assert tried > 600 and matched > 4000
    assert failures == 0, f"{failures} of {matched} matching lines lack a claimed literal"


def test_blocks_of_lines_find_what_line_by_line_finds() -> None:
    """Blocks of short lines are searched at once first; 3,000 random documents × patterns (with
    ``\\A``, ``\\z``, ``(?-m)``, ``\\s``, ``[^a]``, ``(?s).`` that behave differently across lines) and
    1,000 exact needles find exactly the (line, column) pairs a line-by-line search finds."""
    rng = random.Random(5)
    extra = ["\\A", "\\z", "(?-m)", "(?s)", "\\s", "\\S", "[^a]", "\\W", "\\B", "$", "^", ".*"]
    differences, hits = [], 0
    for case in range(4000):
        doc = "\n".join(
            "".join(rng.choice("aab .A") for _ in range(rng.randint(0, 8))) for _ in range(rng.randint(1, 30))
        )
        lines = doc.split("\n")
        if case < 3000:
            pattern = "".join(rng.choice(_PIECES + extra) for _ in range(rng.randint(1, 5)))
            try:
                regex = compile_regex(pattern)
            except InvalidPath:
                continue
            finder: RegexFinder | SubstringFinder = RegexFinder(regex)
            expected = [(i + 1, regex.find(line) + 1) for i, line in enumerate(lines) if regex.find(line) >= 0]
        else:
            pattern = "".join(rng.choice("ab .") for _ in range(rng.randint(1, 3)))
            finder = SubstringFinder(pattern)
            expected = [(i + 1, line.find(pattern) + 1) for i, line in enumerate(lines) if pattern in line]
        if lines[-1] == "":
            expected = [hit for hit in expected if hit[0] < len(lines)]  # a final newline ends the last line
        found = _hits(doc, finder)
        hits += len(found)
        if found != expected:
            differences.append((pattern, doc))
    assert hits > 10_000
    assert differences == [], differences[:3]


def _hits(doc: str, finder: RegexFinder | SubstringFinder) -> list[tuple[int, int]]:
    """The (line, column) of every matching line of ``doc``, scanned in one go."""
    found = scan(BytesDoc(doc.encode()), finder, Budget(), Spot(0, 0))
    return [(h.line, h.column) for h in found if isinstance(h, LineHit)]


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        (r"(a)\1", "backreferences (\\1)"),
        (r"(?P<x>a)(?P=x)", "backreferences ((?P=name))"),
        (r"\k<x>", "backreferences"),
        (r"a(?=b)", "lookahead"),
        (r"a(?!b)", "lookahead"),
        (r"(?<=a)b", "lookbehind"),
        (r"(?<!a)b", "lookbehind"),
        (r"a*+", "possessive"),
        (r"a{2}+", "possessive"),
        (r"(?>a)", "atomic groups"),
        (r"(?#note)", "comments"),
        (r"a\Cb", "single bytes"),
    ],
)
def test_syntax_re2_lacks_is_refused_in_words(pattern: str, words: str) -> None:
    with pytest.raises(InvalidPath) as refused:
        compile_regex(pattern)
    message = str(refused.value)
    assert message.startswith("the search query is invalid: ") and words in message
    assert message.endswith("are not supported: search uses a linear-time regex engine (RE2)")


def test_size_nesting_and_complexity_limits() -> None:
    compile_regex("(" * MAX_NESTING + "a" + ")" * MAX_NESTING)
    with pytest.raises(InvalidPath, match="nest 101 deep; the limit is 100"):
        compile_regex("(" * (MAX_NESTING + 1) + "a" + ")" * (MAX_NESTING + 1))
    with pytest.raises(InvalidPath, match="nest 1,000 deep"):  # was a RecursionError (a 500) in sre_parse
        compile_regex("(?:" * 1000 + "a" + ")" * 1000)
    compile_regex("a" * MAX_PATTERN_CHARS)
    with pytest.raises(TooLarge, match="4,097 characters; the limit is 4,096"):
        compile_regex("a" * (MAX_PATTERN_CHARS + 1))
    with pytest.raises(TooLarge, match="5,000,000 characters"):
        check_query("x" * 5_000_000)
    with pytest.raises(InvalidPath, match="lone surrogate"):
        check_query("a\ud800")
    with pytest.raises(InvalidPath, match=r"15,988 steps and the limit is 10,000"):
        compile_regex(r"(\w|\s){999}(\w|\s){999}")
    with pytest.raises(InvalidPath, match="too complex"):
        compile_regex(r"\pL{1000}")
    with pytest.raises(InvalidPath, match="65 Unicode classes"):
        compile_regex(r"\pL" * 65)
    with pytest.raises(InvalidPath, match="unknown regex flag 'g'"):
        compile_regex("a", "g")


def test_ecmascript_forms_are_translated() -> None:
    assert compile_regex(r"(?<w>x)\uD83D\uDE00\u{e9}\Z").translated == r"(?P<w>x)\x{1F600}\x{E9}\z"
    assert compile_regex("É", "i").find("xé") == 1
    assert compile_regex(r"[\u0041-\u0043]+").find("zzBCA") == 2
    with pytest.raises(InvalidPath, match="not a Unicode character"):
        compile_regex(r"\uD800")


def test_long_lines_are_matched_in_windows_with_the_line_as_context() -> None:
    tail = compile_regex(r"needle\d")
    line = "é" * 100_000 + "needle7"
    assert tail.find(line) == 100_000  # a character column, past a dozen windows
    across = compile_regex("x" * 3000)  # longer than nothing, shorter than the overlap
    for start in range(WINDOW - 3000, WINDOW + 10, 331):
        assert across.find("y" * start + "x" * 3000 + "y") == start
    assert compile_regex("^x").find("b" + "x" * 50_000) == -1  # no window start counts as the line's start
    assert compile_regex("x$").find("x" * 50_000 + "b") == -1
    assert compile_regex(r"\bx").find("a" + "x" * 50_000) == -1
    assert OVERLAP < WINDOW


def test_a_spent_budget_pauses_and_resuming_reaches_the_same_answer() -> None:
    regex = compile_regex(r"needle")
    line = "x" * (5 * WINDOW) + "needle"
    position, pauses = 0, 0
    while True:
        found = regex.first_match(line, position, Budget(seconds=0))
        if not isinstance(found, Paused):
            break
        assert found.offset > position
        position, pauses = found.offset, pauses + 1
    assert found == 5 * WINDOW and pauses >= 5
    assert Budget(seconds=0).spent is False  # never spent before any work was charged


# -- the budget through the provider ----------------------------------------------------------------


@pytest.fixture
def provider(memory_provider: MemoryProvider) -> MemoryProvider:
    made = memory_provider
    for k in range(30):
        made.write(OWNER, f"/files/docs/d{k:02}.txt", "\n".join(f"line {i} pine {k}" for i in range(40)).encode())
    made.write(OWNER, "/files/docs/long.txt", ("x" * 70_000 + "pine" + "y" * 70_000 + "pine\n").encode())
    return made


def _all_pages(provider: MemoryProvider, query: RegexQuery | str) -> tuple[list[tuple[str, int, int]], int]:
    found: list[tuple[str, int, int]] = []
    cursor, pages = None, 0
    while True:
        page = provider.search(OWNER, SearchRequest(query=query, path="/files", limit=1000, cursor=cursor))
        found += [(m.path, m.line, m.column or 0) for m in page.matches]
        pages += 1
        if not page.next_cursor:
            return found, pages
        cursor = page.next_cursor


@pytest.mark.parametrize("query", [RegexQuery(regex=r"p\w+e"), RegexQuery(regex="pine"), "pine"], ids=str)
def test_pages_cut_short_by_the_budget_find_what_one_long_page_finds(
    provider: MemoryProvider, monkeypatch: pytest.MonkeyPatch, query: RegexQuery | str
) -> None:
    whole, pages = _all_pages(provider, query)
    assert pages == 2 and len(whole) == 30 * 40 + 1  # 1,000 then the rest; the long line is one match
    monkeypatch.setattr(search_module, "GREP_LIMITS", GrepLimits(seconds=60, scan_bytes=1))
    cut, pages = _all_pages(provider, query)
    assert cut == whole
    assert pages > 1000  # a page per line scanned, and a few for the long line's windows


def test_a_mid_line_cursor_resumes_in_the_line(provider: MemoryProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_module, "GREP_LIMITS", GrepLimits(seconds=0, scan_bytes=1 << 30))
    request = SearchRequest(query=RegexQuery(regex="pine"), path="/files/docs/long.txt")
    page = provider.search(OWNER, request)
    assert page.matches == [] and page.next_cursor
    found = []
    while page.next_cursor:
        page = provider.search(OWNER, request.model_copy(update={"cursor": page.next_cursor}))
        found += [(m.line, m.column) for m in page.matches]
    assert found == [(1, 70_001)]


def test_a_forged_cursor_is_invalid_path(provider: MemoryProvider) -> None:
    import base64
    import json

    for position in (
        {"p": 1, "l": 0},
        {"p": "/x", "l": -1},
        {"p": "/x", "l": "2"},
        {"p": "/x"},
        {"p": "/x", "l": 1, "o": 1.5},
    ):
        cursor = base64.urlsafe_b64encode(json.dumps({"k": "grep", **position}).encode()).decode()
        with pytest.raises(InvalidPath, match="cursor"):
            provider.search(OWNER, SearchRequest(query="pine", path="/files", cursor=cursor))


def test_list_globs_are_capped_and_still_filter(provider: MemoryProvider) -> None:
    names = [e.path.rsplit("/", 1)[-1] for e in provider.list(OWNER, "/files/docs", glob="d0[!1-8].txt").entries]
    assert names == ["d00.txt", "d09.txt"]
    for folder in ("/files/docs", "/facts", "/history", "/"):
        with pytest.raises(InvalidPath, match="4,096"):
            provider.list(OWNER, folder, glob="x" * 50_001)
