"""Semantic search: fabric recall (and episode recall over the ledger) ranked by score, each with its ``x-explain`` row.

Hits rank by the fused relevance, then recency and importance nudge them (:data:`SEARCH_SCORING`,
docs/memory-fabric.md, "Recall and scoring"). A note shows at its folder's path while it is the
version valid now, else at its ``/history`` version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from afi.errors import InvalidPath
from afi.model import Match, MatchPage, SearchRequest, SemanticQuery
from afi.paths import is_within

from ..fabric.embedders import hash_tokens
from ..fabric.render import render_note
from ..fabric.types import ExplainRow, RecallHit
from ..ledger.conversation import episode_recall
from ..tree.at import AT_AREAS, AT_ROOT, AtPath, parse_at
from ..tree.locate import note_path
from .cursor import decode_cursor, encode_cursor

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["SEARCH_SCORING", "hit_path", "semantic", "semantic_matches"]

SEARCH_SCORING = {"recency_weight": 0.1, "importance_weight": 0.1, "half_life_ms": 30 * 86_400_000}


def semantic(space: Space, request: SearchRequest, scope: str, limit: int) -> MatchPage:
    """Run a semantic query over the notes (and episodes) the scope reaches; return one page by score."""
    query = request.query
    assert isinstance(query, SemanticQuery)
    if not query.semantic.strip():
        raise InvalidPath("the semantic query is empty: ask a question")
    if is_within(scope, AT_ROOT):
        where = parse_at(scope, space)
        if where is None or not where.segment:
            return semantic_matches([], request, scope, limit)
        return semantic_matches(_at_rows(space, request, where), request, scope, limit, _reading(space, where.at))
    kinds = request.kinds or _kinds_for_scope(scope)
    note_kinds = [k for k in kinds if k != "episode"]
    pairs: list[tuple[RecallHit, ExplainRow]] = []
    pending = None
    if note_kinds:
        result = space.fabric.recall(query.semantic, kinds=note_kinds, as_of=request.as_of, top_k=32,
                                     budget=request.budget, scoring=SEARCH_SCORING)  # fmt: skip
        pairs = list(zip(result.hits, result.explain, strict=True))
        pending = result.vectors_pending
    if "episode" in kinds:
        memory = space.fabric.memory
        pairs += episode_recall(memory.embedder, space.ledger.observations(), query.semantic, top_k=32,
                                scope=memory.scope)  # fmt: skip
        pairs.sort(key=lambda pair: -pair[0].score)
    named = [(hit.kind, hit.name) for hit, _ in pairs if hit.kind in ("fact", "procedure") and hit.name is not None]
    current_ids = space.notes.current_ids(named)
    rows = []
    for hit, explain in pairs:
        current = hit.name is not None and current_ids.get((hit.kind, hit.name)) == hit.id
        rows.append((hit, explain.model_dump(exclude_none=True), hit_path(hit, current)))
    page = semantic_matches(rows, request, scope, limit, _reading(space, None))
    return page.model_copy(update={"x_vectors_pending": pending}) if pending else page


def _at_rows(space: Space, request: SearchRequest, where: AtPath) -> list[tuple[RecallHit, dict[str, object], str]]:
    """Semantic search inside ``/.afi/at/<instant>`` (``where``): recall as of the instant, of the notes
    written by then, each at its path in that instant's tree (its ``history`` folder when the scope is there)."""
    query = request.query
    assert isinstance(query, SemanticQuery)
    kind = AT_AREAS.get(where.area) if where.area else None
    kinds = [kind] if kind else ["fact", "procedure"]
    result = space.fabric.recall(query.semantic, kinds=kinds, as_of=where.at, top_k=32, budget=request.budget,
                                 scoring=SEARCH_SCORING)  # fmt: skip
    pairs = [(h, e) for h, e in zip(result.hits, result.explain, strict=True) if h.created_at <= where.at]
    named = [(hit.kind, hit.name) for hit, _ in pairs if hit.name is not None]
    current = space.notes.current_ids(named, where.at)
    rows = []
    for hit, explain in pairs:
        if where.area == "history":
            path = f"{where.base}/history/{hit.id}.md"
        elif hit.name is not None and current.get((hit.kind, hit.name)) == hit.id:
            path = f"{where.base}/{'facts' if hit.kind == 'fact' else 'procedures'}/{hit.name}.md"
        else:
            continue
        rows.append((hit, explain.model_dump(exclude_none=True), path))
    return rows


_AREA_KINDS = (("/facts", "fact"), ("/procedures", "procedure"), ("/files", "file"), ("/episodes", "episode"))


def _kinds_for_scope(scope: str) -> list[str]:
    """The kinds a tree search reaches: those of every area under the scope (all of them at ``/``;
    the fabric's own ``recall()`` keeps its rule of leaving procedures out unless asked)."""
    if is_within(scope, "/history"):
        return ["fact", "procedure", "file"]
    return [kind for area, kind in _AREA_KINDS if is_within(scope, area) or is_within(area, scope)]


def semantic_matches(
    hits: list[tuple[RecallHit, dict[str, object], str]],
    request: SearchRequest,
    scope: str,
    limit: int,
    front_lines: Callable[[RecallHit, str], int] | None = None,
) -> MatchPage:
    """Given recall hits with their explain rows and tree paths, return a page ordered by score; a
    line is numbered after the ``front_lines(hit, path)`` lines the note's text puts before its
    content there (by default, those of its stored rendering)."""
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
        line, best = _best_line(hit.content, query.semantic)
        text = best if len(best) <= 256 else best[:255] + "…"
        line += 0 if path.startswith("/files/") else (front_lines or _content_line)(hit, path)
        ranked.append(Match(path=path, line=line, text=text, score=score, x_explain=explain, x_id=hit.id,
                            x_kind=hit.kind))  # fmt: skip
    page = ranked[start : start + limit]
    more = start + limit < len(ranked)
    return MatchPage(matches=page, next_cursor=encode_cursor("semantic", {"o": start + limit}) if more else None)


def _best_line(content: str, question: str) -> tuple[int, str]:
    """The line of the content (1-based) that holds the most of the question's words, and its text;
    the first line with any text when none holds one."""
    words = set(hash_tokens(question))
    lines = content.split("\n")
    scored = [(len(words.intersection(hash_tokens(line))), -i) for i, line in enumerate(lines) if line.strip()]
    if not scored:
        return 1, lines[0]
    _, index = max(scored)
    return -index + 1, lines[-index]


def _content_line(hit: RecallHit, path: str, text: str | None = None) -> int:
    """How many lines the note's Markdown (``text``, by default its stored rendering) puts before its
    content (the front matter), so a line of the content is numbered as exact search numbers it in
    the same document."""
    rendered = render_note(hit) if text is None else text
    body = hit.content if hit.content.endswith("\n") else hit.content + "\n"
    return rendered[: len(rendered) - len(body)].count("\n")


def _reading(space: Space, at: str | None) -> Callable[[RecallHit, str], int]:
    """The front lines of a hit as its path shows it: a version of ``/history`` as it reads now, one of
    ``/.afi/at/<instant>`` (``at``) as it read then (:mod:`..tree.versions`), else as stored."""

    def front_lines(hit: RecallHit, path: str) -> int:
        if at is None and not is_within(path, "/history"):
            return _content_line(hit, path)
        found = space.notes.version(hit.id, at)
        return _content_line(hit, path, None if found is None else found[1])

    return front_lines


def hit_path(hit: RecallHit, current: bool) -> str:
    """Where a recalled note shows in the tree: its folder when current, else its history version."""
    if hit.kind == "file" and hit.path:
        return "/files/" + hit.path.lstrip("/")
    if hit.kind == "episode":
        return f"/episodes/{hit.id}.md"
    if current and hit.name and hit.kind in ("fact", "procedure"):
        return note_path(hit.kind, hit.name)
    return f"/history/{hit.id}.md"
