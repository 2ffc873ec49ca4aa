"""Scenarios: search in exact, regex and semantic mode."""

from __future__ import annotations

from ..clients.base import AfiClient
from ..model import Match
from ._base import Context, Skip, check, expect_error, scenario


def _need(ctx: Context, mode: str) -> None:
    ctx.need_data()
    if mode not in ctx.modes:
        raise Skip(f"the manifest does not declare the {mode} mode (search.undeclared_mode checks the refusal)")


def _where(matches: list[Match]) -> list[tuple[str, int]]:
    return [(m.path, m.line) for m in matches]


@scenario("search.exact.order", "exact matches are ordered by (path, line)", profile=2, verb="search")
def exact_order(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    got = _where(client.search(ctx.marker, path=ctx.root).matches)
    want = [(ctx.at("alpha.txt"), 2), (ctx.at("beta.txt"), 2), (ctx.at("sub", "gamma.md"), 2)]
    check(got == want, f"expected {want}, got {got}")


@scenario("search.exact.fields", "a match has a 1-based line and column and the line's text", profile=2, verb="search")
def exact_fields(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    first = client.search(ctx.marker, path=ctx.root).matches[0]
    check(first.line == 2, f"line is {first.line}")
    check(first.text.rstrip("\n") == f"the {ctx.marker} sings", f"text is {first.text!r}")
    if first.column is not None:
        check(first.column == 5, f"column is {first.column}, the marker starts at column 5 (1-based)")


@scenario("search.exact.no_score", "exact and regex matches carry no score", profile=2, verb="search")
def exact_no_score(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    matches = client.search(ctx.marker, path=ctx.root).matches
    check(matches and all(m.score is None for m in matches), "an exact match carries a score")


@scenario("search.exact.case", "exact mode is a case-sensitive substring", profile=2, verb="search")
def exact_case(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    got = _where(client.search(ctx.marker.upper(), path=ctx.root).matches)
    check(got == [(ctx.at("alpha.txt"), 4)], f"the upper-case marker matched {got}")


@scenario("search.exact.context", "context lines before and after (x-context)", profile=2, verb="search")
def exact_context(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    first = client.search(ctx.marker, path=ctx.at("alpha.txt"), **{"x-context": 1}).matches[0]
    check(first.context is not None, "no context came back for x-context 1")
    assert first.context is not None
    check(first.context.before == ["first line"], f"before is {first.context.before}")
    check(first.context.after == ["third line"], f"after is {first.context.after}")


@scenario("search.exact.scope", "path scopes the search to a subtree", profile=2, verb="search")
def exact_scope(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    got = _where(client.search(ctx.marker, path=ctx.at("sub")).matches)
    check(got == [(ctx.at("sub", "gamma.md"), 2)], f"scoped to sub/ gave {got}")


@scenario(
    "search.exact.paging", "limit and cursor page through matches without dupes or gaps", profile=2, verb="search"
)
def exact_paging(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    whole = _where(client.search(ctx.marker, path=ctx.root).matches)
    paged: list[tuple[str, int]] = []
    cursor: str | None = None
    for _ in range(20):
        page = client.search(ctx.marker, path=ctx.root, limit=1, cursor=cursor)
        check(len(page.matches) <= 1, f"limit 1 gave {len(page.matches)} matches")
        paged += _where(page.matches)
        cursor = page.next_cursor
        if not cursor:
            break
    check(paged == whole, f"pages of 1 gave {paged}, one page gave {whole}")


@scenario("search.exact.bad_limit", "a zero limit is invalid_path", profile=2, verb="search")
def exact_bad_limit(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    expect_error("invalid_path", client.search, ctx.marker, path=ctx.root, limit=0)


@scenario("search.exact.notes", "exact search finds a string inside a note", profile=3, verb="search")
def exact_notes(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    got = [m.path for m in client.search(ctx.marker, path="/facts").matches]
    check(ctx.note("sky") in got, f"the marker written into {ctx.note('sky')} was not found: {got}")


@scenario("search.regex.basic", "a regex matches lines", profile=2, verb="search")
def regex_basic(client: AfiClient, ctx: Context) -> None:
    _need(ctx, "regex")
    got = _where(client.search({"regex": r"canary-[0-9a-f]+ (sings|in)"}, path=ctx.root).matches)
    check(got == [(ctx.at("alpha.txt"), 2), (ctx.at("sub", "gamma.md"), 2)], f"got {got}")


@scenario("search.regex.flag_i", "flag i ignores case", profile=2, verb="search")
def regex_flag_i(client: AfiClient, ctx: Context) -> None:
    _need(ctx, "regex")
    got = _where(client.search({"regex": f"{ctx.marker} (sings|shouts)", "flags": "i"}, path=ctx.root).matches)
    check(got == [(ctx.at("alpha.txt"), 2), (ctx.at("alpha.txt"), 4)], f"got {got}")
    plain = _where(client.search({"regex": f"{ctx.marker} (sings|shouts)"}, path=ctx.root).matches)
    check(plain == [(ctx.at("alpha.txt"), 2)], f"without i: {plain}")


@scenario("search.regex.flag_m", "flag m anchors ^ and $ at line ends", profile=2, verb="search")
def regex_flag_m(client: AfiClient, ctx: Context) -> None:
    _need(ctx, "regex")
    got = _where(client.search({"regex": f"^another {ctx.marker} line$", "flags": "m"}, path=ctx.root).matches)
    check(got == [(ctx.at("beta.txt"), 2)], f"got {got}")


@scenario("search.regex.bad", "a bad regex is invalid_path, and the message blames the query", profile=2, verb="search")
def regex_bad(client: AfiClient, ctx: Context) -> None:
    _need(ctx, "regex")
    err = expect_error("invalid_path", client.search, {"regex": "(unclosed"}, path=ctx.root)
    words = ("query", "regex", "pattern", "expression")
    check(any(w in err.message.lower() for w in words), f"the message does not name the query: {err.message!r}")


@scenario("search.semantic.order", "semantic matches: scores in [0,1], highest first", profile=2, verb="search")
def semantic_order(client: AfiClient, ctx: Context) -> None:
    _need(ctx, "semantic")
    matches = client.search({"semantic": "what colour is the sky over the harbour"}, path="/facts").matches
    check(matches, "semantic search found nothing among the facts")
    check(all(m.score is not None for m in matches), "a semantic match has no score")
    scores = [m.score or 0.0 for m in matches]
    check(all(0.0 <= s <= 1.0 for s in scores), f"scores outside [0,1]: {scores}")
    check(scores == sorted(scores, reverse=True), f"not highest first: {scores}")


@scenario(
    "search.semantic.relevance", "the note about the query ranks above an unrelated one", profile=2, verb="search"
)
def semantic_relevance(client: AfiClient, ctx: Context) -> None:
    _need(ctx, "semantic")
    matches = client.search({"semantic": "what colour is the sky over the harbour at dawn"}, path="/facts").matches
    ranks = {m.path: i for i, m in enumerate(matches)}
    sky, coffee = ctx.note("sky"), ctx.note("coffee")
    check(sky in ranks, f"{sky} is not among {list(ranks)[:10]}")
    check(coffee not in ranks or ranks[sky] < ranks[coffee], "the coffee note outranks the sky note")


@scenario("search.semantic.threshold", "threshold drops matches scoring below it", profile=2, verb="search")
def semantic_threshold(client: AfiClient, ctx: Context) -> None:
    _need(ctx, "semantic")
    query = "what colour is the sky over the harbour"
    loose = client.search({"semantic": query, "threshold": 0.0}, path="/facts").matches
    check(loose, "threshold 0 returned nothing")
    cut = (loose[0].score or 0.0) - 1e-6 if len(loose) == 1 else ((loose[0].score or 0) + (loose[-1].score or 0)) / 2
    strict = client.search({"semantic": query, "threshold": cut}, path="/facts").matches
    check(all((m.score or 0.0) >= cut for m in strict), f"a match under threshold {cut}: {[m.score for m in strict]}")
    check(len(strict) <= len(loose), "a higher threshold returned more")
    check(strict, f"threshold {cut} (under the best score {loose[0].score}) dropped everything")


@scenario("search.semantic.explain", "semantic matches carry x-explain", profile=2, verb="search")
def semantic_explain(client: AfiClient, ctx: Context) -> None:
    _need(ctx, "semantic")
    matches = client.search({"semantic": "sky harbour"}, path="/facts").matches
    check(matches, "semantic search found nothing among the facts")
    check(all(isinstance(m.x_explain, dict) and m.x_explain for m in matches), "a match lacks x-explain")
