"""``search`` over a space's tree: grep (exact, regex) served from trigram indexes, and semantic recall.

Grep results are ordered by (path, line) and paged with a cursor holding the last (path, line), so
a page costs the candidate lookup plus the lines of the documents it returns. Semantic results are
fabric recall hits ordered by score, each with its ``x-explain`` row.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from afi.errors import InvalidPath
from afi.model import Match, MatchPage, RegexQuery, SearchRequest, SemanticQuery
from afi.paths import is_within

from .cursor import decode_cursor, encode_cursor
from .grep import Finder, compile_regex, find_lines, regex_finder, required_literals, substring_finder
from .tree import note_path
from .types import RecallHit

__all__ = ["Candidate", "GrepSource", "grep", "hit_path", "semantic_matches"]

MAX_CONTEXT_LINES = 10


Candidate = tuple[str, str, Any]  # (path, source, key): where a document is, and how to load its text
LOAD_BATCH = 64


@dataclass(frozen=True)
class GrepSource:
    """What grep reads in one space.

    ``candidates(literals)`` returns the documents that may match, sorted by path and already scoped;
    ``load(batch)`` returns their texts in order (``None`` for one that vanished meanwhile). Texts are
    loaded only for the documents a page reaches.
    """

    candidates: Callable[[list[str]], list[Candidate]]
    load: Callable[[list[Candidate]], list[str | None]]


def grep(source: GrepSource, request: SearchRequest, scope: str, limit: int) -> MatchPage:
    """Run an exact or regex search; return one page of matches ordered by (path, line)."""
    finder, literals = _finder(request)
    if not 0 <= request.context_lines <= MAX_CONTEXT_LINES:
        raise InvalidPath(f"x-context takes 0 to {MAX_CONTEXT_LINES} lines")
    position = decode_cursor("grep", request.cursor)
    after_path, after_line = ("", 0) if position is None else (str(position["p"]), int(position["l"]))

    candidates = source.candidates(literals)
    index = bisect.bisect_left(candidates, after_path, key=lambda c: c[0])
    matches: list[Match] = []
    while index < len(candidates):
        batch = candidates[index : index + LOAD_BATCH]
        index += len(batch)
        for (path, _, _), text in zip(batch, source.load(batch), strict=True):
            if text is None:
                continue
            for hit in find_lines(text, finder, context=request.context_lines):
                if path == after_path and hit.line <= after_line:
                    continue
                if len(matches) == limit:
                    last = matches[-1]
                    cursor = encode_cursor("grep", {"p": last.path, "l": last.line})
                    return MatchPage(matches=matches, next_cursor=cursor)
                matches.append(Match(path=path, line=hit.line, column=hit.column, text=hit.text, context=hit.context))
    return MatchPage(matches=matches)


def _finder(request: SearchRequest) -> tuple[Finder, list[str]]:
    query = request.query
    if isinstance(query, str):
        if query == "":
            raise InvalidPath("the search query is empty: give the text to look for")
        return substring_finder(query), [query] if len(query) >= 3 else []
    if isinstance(query, RegexQuery):
        regex = compile_regex(query.regex, query.flags)
        return regex_finder(regex), required_literals(regex)
    raise InvalidPath("this query is not a grep (exact or regex) query")  # pragma: no cover


def semantic_matches(
    hits: list[tuple[RecallHit, dict[str, object], str]], request: SearchRequest, scope: str, limit: int
) -> MatchPage:
    """Given recall hits with their explain rows and tree paths, return a page ordered by score."""
    query = request.query
    assert isinstance(query, SemanticQuery)
    position = decode_cursor("semantic", request.cursor)
    start = 0 if position is None else int(position["o"])
    threshold = query.threshold
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        raise InvalidPath("the semantic threshold must be between 0 and 1")
    ranked: list[Match] = []
    for hit, explain, path in hits:
        score = max(0.0, min(1.0, float(hit.score)))
        if threshold is not None and score < threshold:
            continue
        if not is_within(path, scope):
            continue
        first = hit.content.split("\n", 1)[0]
        text = first if len(first) <= 256 else first[:255] + "…"
        ranked.append(Match(path=path, line=1, text=text, score=score, x_explain=explain, x_id=hit.id, x_kind=hit.kind))
    page = ranked[start : start + limit]
    more = start + limit < len(ranked)
    return MatchPage(matches=page, next_cursor=encode_cursor("semantic", {"o": start + limit}) if more else None)


def hit_path(hit: RecallHit, current: bool) -> str:
    """Where a recalled note shows in the tree: its folder when current, else its history version."""
    if hit.kind == "file" and hit.path:
        return "/files/" + hit.path.lstrip("/")
    if hit.kind == "episode":
        return f"/episodes/{hit.id}.md"
    if current and hit.name and hit.kind in ("fact", "procedure"):
        return note_path(hit.kind, hit.name)
    return f"/history/{hit.id}.md"
