"""Grep (exact, regex) over a space's tree, paged: candidates from trigram indexes, lines matched within a budget.

Grep results are ordered by (path, line) and paged with a cursor holding the last (path, line) and
the byte where that document goes on, so a page costs the candidate lookup plus the bytes it reads.
Each page also works within :data:`GREP_LIMITS` (a deadline and a number of bytes scanned): once
they run out the page ends early, with the matches found so far, a cursor at the point reached
(even in the middle of a line) and ``x-truncated`` saying where that is and what is left.
Documents are texts from the store, or files read from disk a piece at a time (:mod:`.scan`):
those the trigram index does not hold (over 1 MiB, binary, not UTF-8) are searched whatever their size.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from afi.errors import InvalidPath
from afi.model import Match, MatchPage, RegexQuery, SearchRequest, Truncated
from afi.regex import Budget, check_query

from .cursor import decode_cursor, encode_cursor
from .lines import Finder, RegexFinder, Spot, Stop, SubstringFinder, compile_regex
from .scan import BytesDoc, Doc, scan

__all__ = ["GREP_LIMITS", "Candidate", "GrepLimits", "GrepSource", "Opener", "Text", "grep"]

MAX_CONTEXT_LINES = 10


@dataclass(frozen=True)
class GrepLimits:
    """The work one page of an exact or regex search may do before it ends early with a cursor."""

    seconds: float = 3.0
    scan_bytes: int = 128 << 20


GREP_LIMITS = GrepLimits()


Candidate = tuple[str, str, Any]  # (path, source, key): where a document is, and how to load its text
Opener = Callable[[], AbstractContextManager["Doc | None"]]  # a file, opened when a page reaches it
Text = str | Opener  # a document as grep reads it: a text in memory, or a file read a piece at a time
LOAD_BATCH = 64
# The trigram index is asked for at most this many literals of at most this many characters: a
# prefix narrows as well as the whole, and FTS5's phrase lookup costs each trigram's posting list
# (a 4,096-character query of common words took 0.85 s over 300 files, 10 ms when cut to 48).
INDEX_LITERALS = 4
INDEX_LITERAL_CHARS = 48


@dataclass(frozen=True)
class GrepSource:
    """What grep reads in one space.

    ``candidates(literals)`` returns the documents that may match, sorted by path and already scoped;
    ``load(batch)`` returns them in order (``None`` for one that vanished meanwhile). Documents are
    loaded only for the candidates a page reaches, and a file is opened only when the page reaches it.
    ``catch_up(after)``, when given, brings the index in line from the path a page starts after, within
    its own budget, and returns the first path it has not caught up with (None: all): the page ends
    there, with a cursor to go on from it and ``x-truncated`` (reason ``index``).
    """

    candidates: Callable[[list[str]], list[Candidate]]
    load: Callable[[list[Candidate]], list[Text | None]]
    catch_up: Callable[[str], str | None] | None = None


def grep(
    source: GrepSource, request: SearchRequest, scope: str, limit: int, limits: GrepLimits | None = None
) -> MatchPage:
    """Run an exact or regex search; return one page of matches ordered by (path, line).

    A page holds ``limit`` matches unless the search ends first, or the page's work runs out
    (``limits``, by default :data:`GREP_LIMITS`: 3 s or 128 MiB scanned): then it holds the matches
    found so far (maybe none), a ``next_cursor`` to go on from where it stopped, and ``x-truncated``.
    """
    finder, literals = _finder(request)
    if not 0 <= request.context_lines <= MAX_CONTEXT_LINES:
        raise InvalidPath(f"x-context takes 0 to {MAX_CONTEXT_LINES} lines")
    after_path, after = _position(decode_cursor("grep", request.cursor))
    work = limits or GREP_LIMITS
    budget = Budget(work.seconds, work.scan_bytes)

    until = source.catch_up(after_path) if source.catch_up is not None else None
    candidates = source.candidates(_indexable([lit[:INDEX_LITERAL_CHARS] for lit in literals[:INDEX_LITERALS]]))
    index = bisect.bisect_left(candidates, after_path, key=lambda c: c[0])
    waiting = 0
    if until is not None:  # what the index has not caught up with waits for the next page
        cut = bisect.bisect_left(candidates, until, key=lambda c: c[0])
        candidates, waiting = candidates[:cut], len(candidates) - cut
    page = _Page(finder, budget, limit, request.context_lines)
    while index < len(candidates):
        batch = candidates[index : index + LOAD_BATCH]
        for offset, ((path, _, _), text) in enumerate(zip(batch, source.load(batch), strict=True)):
            left = len(candidates) - index - offset
            if budget.spent:
                return page.cut_short(path, Spot(0, 0), left)
            start, ended = after if path == after_path else Spot(0, 0), None
            if isinstance(text, str):
                ended = page.scan(path, BytesDoc(text.encode("utf-8", "surrogatepass")), start, left)
            elif text is not None:
                with text() as doc:
                    ended = None if doc is None else page.scan(path, doc, start, left)
            if ended is not None:
                return ended
        index += len(batch)
    if until is not None:
        truncated = Truncated(reason="index", path=until, line=0, offset=0, remaining=waiting)
        return MatchPage(matches=page.matches, next_cursor=_grep_cursor(until, Spot(0, 0)), x_truncated=truncated)
    return MatchPage(matches=page.matches)


class _Page:
    """The page being filled: its matches, and where the document of the last one goes on after it."""

    def __init__(self, finder: Finder, budget: Budget, limit: int, context: int) -> None:
        self.finder = finder
        self.budget = budget
        self.limit = limit
        self.context = context
        self.matches: list[Match] = []
        self.last = Spot(0, 0)

    def scan(self, path: str, doc: Doc, start: Spot, left: int) -> MatchPage | None:
        """Add the matches of one document from ``start``; return the page once it ends there."""
        for hit in scan(doc, self.finder, self.budget, start, self.context):
            if isinstance(hit, Stop):
                return self.cut_short(path, hit.spot, left)
            if len(self.matches) == self.limit:
                return MatchPage(matches=self.matches, next_cursor=_grep_cursor(self.matches[-1].path, self.last))
            self.matches.append(Match(path=path, line=hit.line, column=hit.column, text=hit.text, context=hit.context))
            self.last = hit.after
        return None

    def cut_short(self, path: str, spot: Spot, left: int) -> MatchPage:
        """The page the budget ended at ``spot`` in ``path``, ``left`` documents unsearched (it included)."""
        truncated = Truncated(reason=self.budget.reason, path=path, line=spot.line, offset=spot.at, remaining=left)
        return MatchPage(matches=self.matches, next_cursor=_grep_cursor(path, spot), x_truncated=truncated)


def _grep_cursor(path: str, spot: Spot) -> str:
    """Resume in ``path`` after line ``spot.line``, from byte ``spot.at`` (inside a line when ``c``
    gives its characters before it, or passing the rest of an answered one over when ``s``)."""
    position: dict[str, Any] = {"p": path, "l": spot.line}
    if spot.at:
        position["b"] = spot.at
    if spot.col:
        position["c"] = spot.col
    if spot.skip:
        position["s"] = 1
    return encode_cursor("grep", position)


def _position(position: dict[str, Any] | None) -> tuple[str, Spot]:
    if position is None:
        return "", Spot(0, 0)
    path = position.get("p")
    numbers = [position.get(key, 0) for key in ("l", "b", "c", "s", "o")]
    if isinstance(path, str) and "l" in position and all(type(n) is int and n >= 0 for n in numbers):
        line, at, col, skip, _ = numbers
        # A cursor with a line and no byte (from before bytes were kept) is found by counting lines.
        return path, Spot(line, at if "b" in position or line == 0 else -1, col, bool(skip))
    raise InvalidPath("the cursor is not one this server issued; start again without a cursor")


def _indexable(literals: list[str]) -> list[str]:
    """The literals as the trigram index can look them up: FTS5 ends a quoted string at a NUL, so split there."""
    pieces = [piece for literal in literals for piece in literal.split("\x00") if len(piece) >= 3]
    return sorted(pieces, key=len, reverse=True)


def _finder(request: SearchRequest) -> tuple[Finder, list[str]]:
    query = request.query
    if isinstance(query, str):
        if query == "":
            raise InvalidPath("the search query is empty: give the text to look for")
        check_query(query)
        return SubstringFinder(query), [query] if len(query) >= 3 else []
    if isinstance(query, RegexQuery):
        regex = compile_regex(query.regex, query.flags)
        return RegexFinder(regex), regex.literals
    raise InvalidPath("this query is not a grep (exact or regex) query")  # pragma: no cover
