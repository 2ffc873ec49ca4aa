"""Scenarios: cloaking across spaces, credentials, and rate limits."""

from __future__ import annotations

from ..clients.base import AfiClient
from ..errors import RateLimited
from ._base import Context, Failure, Skip, check, expect_error, scenario


def _other(ctx: Context) -> AfiClient:
    ctx.need_data()
    if ctx.other is None:
        raise Skip("no client of another space was given (--other-token)")
    return ctx.other


@scenario("cloak.stat", "another space's caller gets not_found for stat", verb="stat")
def cloak_stat(client: AfiClient, ctx: Context) -> None:
    other = _other(ctx)
    expect_error("not_found", other.stat, ctx.root)
    expect_error("not_found", other.stat, ctx.at("alpha.txt"))
    expect_error("not_found", other.stat, ctx.note("sky"))


@scenario("cloak.read", "another space's caller gets not_found for read", profile=1, verb="read")
def cloak_read(client: AfiClient, ctx: Context) -> None:
    other = _other(ctx)
    expect_error("not_found", other.read, ctx.at("alpha.txt"))
    expect_error("not_found", other.read, ctx.note("sky"))


@scenario("cloak.list", "another space's listings leave the scratch data out", verb="list")
def cloak_list(client: AfiClient, ctx: Context) -> None:
    other = _other(ctx)
    files = [e.path for e in other.list("/files").entries]
    check(ctx.root not in files, f"{ctx.root} is listed for another space")
    facts = [e.path for e in other.list("/facts").entries]
    check(ctx.note("sky") not in facts, "a scratch note is listed for another space")
    expect_error("not_found", other.list, ctx.root)


@scenario("cloak.search", "another space's search finds none of the scratch data", profile=2, verb="search")
def cloak_search(client: AfiClient, ctx: Context) -> None:
    other = _other(ctx)
    check(not other.search(ctx.marker, path="/").matches, "another space's search found the marker")


@scenario("cloak.write", "another space's caller cannot touch the scratch data", profile=3, verb="delete")
def cloak_write(client: AfiClient, ctx: Context) -> None:
    other = _other(ctx)
    expect_error("not_found", other.delete, ctx.at("alpha.txt"))
    check(client.read(ctx.at("alpha.txt")).data == ctx.state["alpha"], "another space changed the file")


def _auth_required(ctx: Context) -> None:
    if ctx.manifest is None or not ctx.manifest.auth.get("required"):
        raise Skip("the manifest says auth is not required")


@scenario("auth.missing", "a call without credentials is unauthorized", verb="stat", data=False)
def auth_missing(client: AfiClient, ctx: Context) -> None:
    _auth_required(ctx)
    if ctx.anonymous is None:
        raise Skip("this transport has no credential-less client")
    expect_error("unauthorized", ctx.anonymous.stat, "/")


@scenario("auth.bad", "a call with an unknown token is unauthorized", verb="stat", data=False)
def auth_bad(client: AfiClient, ctx: Context) -> None:
    _auth_required(ctx)
    if ctx.forged is None:
        raise Skip("this transport has no forged-token client")
    expect_error("unauthorized", ctx.forged.stat, "/")


@scenario(
    "limits.rate", "a burst over the declared rate limit is rate_limited with retry_after", verb="stat", data=False
)
def limits_rate(client: AfiClient, ctx: Context) -> None:
    limits = (ctx.manifest.model_extra or {}).get("x-limits", {}) if ctx.manifest else {}
    rate = limits.get("rate") if isinstance(limits, dict) else None
    if not isinstance(rate, dict) or "burst" not in rate:
        raise Skip("the manifest declares no rate limit under x-limits.rate")
    calls = int(rate["burst"]) * 2 + 10
    for _ in range(calls):
        try:
            client.stat("/")
        except RateLimited as err:
            check(err.retry_after is not None and err.retry_after > 0, f"retry_after is {err.retry_after!r}")
            return
    raise Failure(f"{calls} calls in a burst were never rate_limited (declared burst {rate['burst']})")
