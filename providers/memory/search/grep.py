"""Grep (exact, regex) over a space's tree, paged: candidates from trigram indexes, lines matched within a budget.

Grep results are ordered by (path, line) and paged with a cursor holding the last (path, line), so
a page costs the candidate lookup plus the lines of the documents it returns. Each page also works
within :data:`GREP_LIMITS` (a deadline and a number of bytes scanned): once they run out the page
ends early, with the matches found so far and a cursor at the point reached (even in the middle of
a long line).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from afi.errors import InvalidPath
from afi.model import Match, MatchPage, RegexQuery, SearchRequest
from afi.regex import Budget, check_query

from .cursor import decode_cursor, encode_cursor
from .lines import Finder, RegexFinder, Stop, SubstringFinder, compile_regex, find_lines

__all__ = ["GREP_LIMITS", "Candidate", "GrepLimits", "GrepSource", "grep"]

MAX_CONTEXT_LINES = 10


@dataclass(frozen=True)
class GrepLimits:
    """The work one page of an exact or regex search may do before it ends early with a cursor."""

    seconds: float = 3.0
    scan_bytes: int = 128 << 20


GREP_LIMITS = GrepLimits()


Candidate = tuple[str, str, Any]  # (path, source, key): where a document is, and how to load its text
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
    ``load(batch)`` returns their texts in order (``None`` for one that vanished meanwhile). Texts are
    loaded only for the documents a page reaches. ``catch_up(after)``, when given, brings the index
    in line from the path a page starts after, within its own budget, and returns the first path it
    has not caught up with (None: all): the page ends there, with a cursor to go on from it.
    """

    candidates: Callable[[list[str]], list[Candidate]]
    load: Callable[[list[Candidate]], list[str | None]]
    catch_up: Callable[[str], str | None] | None = None


def grep(
    source: GrepSource, request: SearchRequest, scope: str, limit: int, limits: GrepLimits | None = None
) -> MatchPage:
    """Run an exact or regex search; return one page of matches ordered by (path, line).

    A page holds ``limit`` matches unless the search ends first, or the page's work runs out
    (``limits``, by default :data:`GREP_LIMITS`: 3 s or 128 MiB of text scanned): then it holds the
    matches found so far (maybe none) and a ``next_cursor`` to go on from where it stopped.
    """
    finder, literals = _finder(request)
    if not 0 <= request.context_lines <= MAX_CONTEXT_LINES:
        raise InvalidPath(f"x-context takes 0 to {MAX_CONTEXT_LINES} lines")
    after_path, after_line, after_offset = _position(decode_cursor("grep", request.cursor))
    work = limits or GREP_LIMITS
    budget = Budget(work.seconds, work.scan_bytes)

    until = source.catch_up(after_path) if source.catch_up is not None else None
    candidates = source.candidates(_indexable([lit[:INDEX_LITERAL_CHARS] for lit in literals[:INDEX_LITERALS]]))
    index = bisect.bisect_left(candidates, after_path, key=lambda c: c[0])
    matches: list[Match] = []
    if until is not None:  # what the index has not caught up with waits for the next page
        candidates = candidates[: bisect.bisect_left(candidates, until, key=lambda c: c[0])]
    while index < len(candidates):
        batch = candidates[index : index + LOAD_BATCH]
        index += len(batch)
        for (path, _, _), text in zip(batch, source.load(batch), strict=True):
            if budget.spent:
                return MatchPage(matches=matches, next_cursor=_grep_cursor(path, 0))
            if text is None:
                continue
            resume = path == after_path
            lines = find_lines(
                text,
                finder,
                budget,
                context=request.context_lines,
                after=after_line if resume else 0,
                offset=after_offset if resume else 0,
            )
            for hit in lines:
                if isinstance(hit, Stop):
                    return MatchPage(matches=matches, next_cursor=_grep_cursor(path, hit.line, hit.offset))
                if len(matches) == limit:
                    last = matches[-1]
                    return MatchPage(matches=matches, next_cursor=_grep_cursor(last.path, last.line))
                matches.append(Match(path=path, line=hit.line, column=hit.column, text=hit.text, context=hit.context))
    if until is not None:
        return MatchPage(matches=matches, next_cursor=_grep_cursor(until, 0))
    return MatchPage(matches=matches)


def _grep_cursor(path: str, line: int, offset: int = 0) -> str:
    """Resume in ``path`` after line ``line``; the next line from byte ``offset`` (when not 0)."""
    return encode_cursor("grep", {"p": path, "l": line, **({"o": offset} if offset else {})})


def _position(position: dict[str, Any] | None) -> tuple[str, int, int]:
    if position is None:
        return "", 0, 0
    path, line, offset = position.get("p"), position.get("l"), position.get("o", 0)
    if isinstance(path, str) and type(line) is int and type(offset) is int and line >= 0 and offset >= 0:
        return path, line, offset
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
