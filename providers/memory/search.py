"""``search`` over a space's tree: grep (exact, regex) served from trigram indexes, and semantic recall.

Grep results are ordered by (path, line) and paged with a cursor holding the last (path, line), so
a page costs the candidate lookup plus the lines of the documents it returns. Semantic results are
fabric recall hits ordered by score, each with its ``x-explain`` row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from afi.errors import InvalidPath
from afi.model import Match, MatchPage, RegexQuery, SearchRequest, SemanticQuery
from afi.paths import is_within

from .cursor import decode_cursor, encode_cursor
from .grep import compile_regex, find_lines, regex_finder, required_literals, substring_finder
from .tree import note_path
from .types import RecallHit

__all__ = ["GrepSource", "grep", "hit_path", "semantic_matches"]

MAX_CONTEXT_LINES = 10


@dataclass(frozen=True)
class GrepSource:
    """What grep reads in one space: candidate documents as (path, text) for given literals."""

    documents: Callable[[list[str]], Iterator[tuple[str, Callable[[], str]]]]


def grep(source: GrepSource, request: SearchRequest, scope: str, limit: int) -> MatchPage:
    """Run an exact or regex search; return one page of matches ordered by (path, line)."""
    query = request.query
    if isinstance(query, str):
        if query == "":
            raise InvalidPath("the search query is empty: give the text to look for")
        finder = substring_finder(query)
        literals = [query] if len(query) >= 3 else []
    elif isinstance(query, RegexQuery):
        regex = compile_regex(query.regex, query.flags)
        finder = regex_finder(regex)
        literals = required_literals(regex)
    else:  # pragma: no cover - the caller routes semantic elsewhere
        raise InvalidPath("semantic queries are not grep")
    if not 0 <= request.context_lines <= MAX_CONTEXT_LINES:
        raise InvalidPath(f"x-context takes 0 to {MAX_CONTEXT_LINES} lines")
    position = decode_cursor("grep", request.cursor)
    after_path, after_line = ("", 0) if position is None else (str(position["p"]), int(position["l"]))

    docs = sorted(
        ((path, text) for path, text in source.documents(literals) if is_within(path, scope) and path >= after_path),
        key=lambda d: d[0],
    )
    matches: list[Match] = []
    for path, text in docs:
        for hit in find_lines(text(), finder, context=request.context_lines):
            if path == after_path and hit.line <= after_line:
                continue
            if len(matches) == limit:
                last = matches[-1]
                return MatchPage(matches=matches, next_cursor=encode_cursor("grep", {"p": last.path, "l": last.line}))
            matches.append(Match(path=path, line=hit.line, column=hit.column, text=hit.text, context=hit.context))
    return MatchPage(matches=matches)


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
