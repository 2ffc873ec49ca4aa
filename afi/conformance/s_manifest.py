"""Scenarios: the manifest (schema, consistency) and which verbs a provider answers."""

from __future__ import annotations

import json

from ..clients.base import AfiClient
from ..errors import Internal
from ..manifest import VERBS, manifest_problems, validate_manifest
from ..model import dump
from ._base import Context, Failure, Skip, check, expect_error, scenario

# One harmless call per verb, to show an omitted verb is refused with `unsupported`.
_PROBES = {
    "stat": lambda c, x: c.stat("/"),
    "list": lambda c, x: c.list("/"),
    "read": lambda c, x: c.read("/.afi/manifest.json"),
    "search": lambda c, x: c.search(x.marker, path=x.root),
    "write": lambda c, x: c.write(x.at("unsupported.txt"), b"x", create_only=True),
    "mkdir": lambda c, x: c.mkdir(x.at("unsupported-dir")),
    "delete": lambda c, x: c.delete(x.at("never-there")),
    "move": lambda c, x: c.move(x.at("never-there"), x.at("never-here")),
}


@scenario("manifest.schema", "the manifest validates against the AFI manifest schema", data=False)
def manifest_schema(client: AfiClient, ctx: Context) -> None:
    data = dump(client.manifest())
    try:
        validate_manifest(data)
    except Internal as err:
        raise Failure(err.message) from None


@scenario("manifest.consistency", "capabilities complete the profile; search modes match the search verb", data=False)
def manifest_consistency(client: AfiClient, ctx: Context) -> None:
    problems = manifest_problems(dump(client.manifest()))
    check(not problems, "; ".join(problems))


@scenario("manifest.profile", "the manifest declares the profile under test", data=False)
def manifest_profile(client: AfiClient, ctx: Context) -> None:
    manifest = client.manifest()
    check(
        manifest.profile >= ctx.profile, f"the kit checks profile {ctx.profile}; the manifest says {manifest.profile}"
    )
    check(manifest.afi_version.startswith("0.1"), f"afi_version is {manifest.afi_version!r}, not 0.1")


@scenario("manifest.as_file", "/.afi/manifest.json reads as the same manifest", profile=1, verb="read", data=False)
def manifest_as_file(client: AfiClient, ctx: Context) -> None:
    result = client.read("/.afi/manifest.json")
    try:
        on_disk = json.loads(result.data)
    except ValueError:
        raise Failure("/.afi/manifest.json is not JSON") from None
    served = dump(client.manifest())
    for key in ("afi_version", "provider", "provider_version", "profile", "capabilities", "search", "auth"):
        check(
            on_disk.get(key) == served.get(key),
            f"{key}: the file says {on_disk.get(key)!r}, manifest() says {served.get(key)!r}",
        )
    check(result.content_type.startswith("application/json"), f"content_type is {result.content_type!r}")


@scenario("manifest.stat", "stat /.afi/manifest.json is a file of the size read returns", verb="stat", data=False)
def manifest_stat(client: AfiClient, ctx: Context) -> None:
    entry = client.stat("/.afi/manifest.json")
    check(entry.type == "file", f"type is {entry.type}")
    if "read" in ctx.capabilities:
        size = len(client.read("/.afi/manifest.json").data)
        check(entry.size == size, f"stat says {entry.size} bytes, read returns {size}")


@scenario("verbs.listed_work", "every verb the manifest lists answers a well-formed call", data=False)
def verbs_listed_work(client: AfiClient, ctx: Context) -> None:
    for verb in ("stat", "list", "read"):
        if verb in ctx.capabilities:
            _PROBES[verb](client, ctx)
    if "search" in ctx.capabilities:
        client.search("no-such-string-" + ctx.tag, path="/")


@scenario("verbs.unlisted_unsupported", "every verb the manifest omits is refused with unsupported", data=False)
def verbs_unlisted(client: AfiClient, ctx: Context) -> None:
    omitted = [verb for verb in VERBS if verb not in ctx.capabilities]
    if not omitted:
        raise Skip("the manifest lists every verb")
    for verb in omitted:
        expect_error("unsupported", _PROBES[verb], client, ctx)


@scenario("search.undeclared_mode", "a search mode the manifest omits is unsupported", profile=2, verb="search")
def search_undeclared_mode(client: AfiClient, ctx: Context) -> None:
    queries = {"regex": {"regex": "x"}, "semantic": {"semantic": "x"}}
    missing = [mode for mode in queries if mode not in ctx.modes]
    if not missing:
        raise Skip("the manifest declares exact, regex and semantic")
    for mode in missing:
        expect_error("unsupported", client.search, queries[mode], path=ctx.root)


@scenario(
    "search.unknown_mode",
    "a query in no known mode is refused (unsupported or invalid)",
    profile=2,
    verb="search",
    data=False,
)
def search_unknown_mode(client: AfiClient, ctx: Context) -> None:
    expect_error(("unsupported", "invalid_path"), client.search, {"fuzzy": "x"}, path="/")
