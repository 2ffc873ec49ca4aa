"""The search page: the three modes through the provider's ``search`` verb, hits made readable.

Semantic hits carry the ranking's explain signals (``x-explain``: similarity, recency, importance,
link), shown as small bars; exact and regex hits show their line with every match marked.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from afi.errors import InvalidPath
from afi.model import Match, SearchRequest
from afi.provider import Caller, Provider
from afi.regex import compile_regex

from .views import href

__all__ = ["MODES", "SIGNALS", "highlight", "search"]

MODES = ("exact", "regex", "semantic")
SIGNALS = ("similarity", "recency", "importance")
MAX_HITS = 50


def highlight(line: str, spans: list[tuple[int, int]]) -> Markup:
    """Given a line and (start, end) columns, return it escaped with each span in ``<mark>``."""
    out: list[str] = []
    at = 0
    for start, end in spans:
        if start < at:
            continue
        out.append(str(escape(line[at:start])))
        out.append(f"<mark>{escape(line[start:end])}</mark>")
        at = end
    out.append(str(escape(line[at:])))
    return Markup("".join(out))  # every piece of the line went through escape()


def _exact_spans(line: str, query: str) -> list[tuple[int, int]]:
    spans, at = [], line.find(query)
    while at >= 0 and query:
        spans.append((at, at + len(query)))
        at = line.find(query, at + len(query))
    return spans


def _request(mode: str, query: str, path: str, as_of: str | None, flags: str) -> SearchRequest:
    if mode == "exact":
        wanted: Any = query
    elif mode == "regex":
        wanted = {"regex": query, "flags": flags}
    else:
        wanted = {"semantic": query}
    body: dict[str, Any] = {"query": wanted, "path": path or "/", "limit": MAX_HITS}
    if mode != "semantic":
        body["x-context"] = 1
    if as_of:
        body["x-as-of"] = as_of
    return SearchRequest.model_validate(body)


def _hit(match: Match, mode: str, marker: Any) -> dict[str, Any]:
    hit: dict[str, Any] = {
        "path": match.path,
        "href": href("browse", path=match.path),
        "line": match.line,
        "kind": match.x_kind,
        "before": match.context.before if match.context else [],
        "after": match.context.after if match.context else [],
    }
    if mode == "semantic":
        explain = match.x_explain or {}
        hit["text"] = match.text
        hit["score"] = match.score
        given = [name for name in SIGNALS if isinstance(explain.get(name), int | float)]
        hit["signals"] = [(name, float(explain[name])) for name in given]
        hit["link"] = bool(explain.get("link"))
    else:
        hit["marked"] = highlight(match.text, marker(match.text))
    return hit


def search(
    provider: Provider, caller: Caller, query: str, mode: str, path: str, as_of: str | None, flags: str
) -> dict[str, Any]:
    """The search page's context: the form's values and, when a query was given, its hits."""
    context: dict[str, Any] = {
        "template": "search.html",
        "title": "Search",
        "query": query,
        "mode": mode if mode in MODES else "exact",
        "path": path or "/",
        "as_of": as_of or "",
        "flags": flags,
        "modes": MODES,
        "hits": None,
    }
    if not query:
        return context
    if mode not in MODES:
        raise InvalidPath(f"unknown search mode {mode!r}: one of {', '.join(MODES)}")
    request = _request(mode, query, path, as_of, flags)
    if mode == "regex":
        pattern = compile_regex(query, flags)
        marker: Any = pattern.spans
    else:
        marker = lambda line: _exact_spans(line, query)  # noqa: E731
    page = provider.search(caller, request)
    context["hits"] = [_hit(m, mode, marker) for m in page.matches]
    context["more"] = page.next_cursor is not None
    return context
