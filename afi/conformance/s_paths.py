"""Scenarios: path normalisation, invalid paths, and stat."""

from __future__ import annotations

import re

from ..clients.base import AfiClient
from ._base import Context, check, expect_error, scenario

_RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


@scenario("stat.root", "stat / always succeeds and is a directory", verb="stat", data=False)
def stat_root(client: AfiClient, ctx: Context) -> None:
    entry = client.stat("/")
    check(entry.path == "/", f"path is {entry.path!r}")
    check(entry.type == "directory", f"type is {entry.type}")
    check(entry.content_type == "inode/directory", f"content_type is {entry.content_type!r}")
    check(entry.size == 0, f"a directory's size is 0, got {entry.size}")


@scenario("stat.file", "stat of a file: type, size, RFC 3339 times, content type", verb="stat")
def stat_file(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    entry = client.stat(ctx.at("alpha.txt"))
    check(entry.path == ctx.at("alpha.txt"), f"path is {entry.path!r}")
    check(entry.type == "file", f"type is {entry.type}")
    check(entry.size == len(ctx.state["alpha"]), f"size is {entry.size}, {len(ctx.state['alpha'])} bytes were written")
    check(_RFC3339.match(entry.mtime) and _RFC3339.match(entry.ctime), f"times not RFC 3339: {entry.mtime!r}")
    check(entry.content_type.startswith("text/plain"), f"a .txt file has content_type {entry.content_type!r}")


@scenario("stat.directory", "stat of a directory: type directory, size 0, inode/directory", verb="stat")
def stat_directory(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    entry = client.stat(ctx.at("sub"))
    check(entry.type == "directory" and entry.size == 0, f"got type {entry.type}, size {entry.size}")
    check(entry.content_type == "inode/directory", f"content_type is {entry.content_type!r}")


@scenario("stat.not_found", "stat of a missing path is not_found", verb="stat")
def stat_not_found(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    expect_error("not_found", client.stat, ctx.at("no-such-file.txt"))


@scenario("paths.double_slash", "'//' collapses", verb="stat")
def paths_double_slash(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    entry = client.stat(ctx.root.replace("/", "//") + "//alpha.txt")
    check(entry.path == ctx.at("alpha.txt"), f"normalised to {entry.path!r}")


@scenario("paths.dot", "'.' segments and a trailing '/' vanish", verb="stat")
def paths_dot(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    entry = client.stat(f"/files/./.conformance-{ctx.tag}/./sub/")
    check(entry.path == ctx.at("sub"), f"normalised to {entry.path!r}")


@scenario("paths.dotdot_inside", "'..' inside the tree resolves", verb="stat")
def paths_dotdot_inside(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    entry = client.stat(ctx.at("sub", "..", "alpha.txt"))
    check(entry.path == ctx.at("alpha.txt"), f"normalised to {entry.path!r}")


@scenario("paths.above_root", "'..' above / is invalid_path", verb="stat", data=False)
def paths_above_root(client: AfiClient, ctx: Context) -> None:
    expect_error("invalid_path", client.stat, "/../etc/passwd")
    expect_error("invalid_path", client.stat, "/files/../../x")


@scenario("paths.nul", "a NUL byte is invalid_path", verb="stat", data=False)
def paths_nul(client: AfiClient, ctx: Context) -> None:
    expect_error("invalid_path", client.stat, "/files/a\x00b")


@scenario("paths.too_long", "a path over the manifest's max_length is invalid_path", verb="stat", data=False)
def paths_too_long(client: AfiClient, ctx: Context) -> None:
    limit = int(ctx.manifest.path.get("max_length", 1024)) if ctx.manifest else 1024
    expect_error("invalid_path", client.stat, "/files/" + "a/" * (limit // 2 + 1))


@scenario("paths.relative", "a relative or empty path is invalid_path", verb="stat", data=False)
def paths_relative(client: AfiClient, ctx: Context) -> None:
    expect_error("invalid_path", client.stat, "files/x")
    expect_error("invalid_path", client.stat, "")


@scenario("paths.case_sensitive", "paths are case-sensitive when the manifest says so", verb="stat")
def paths_case(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    if ctx.manifest and not ctx.manifest.path.get("case_sensitive", True):
        client.stat(ctx.at("ALPHA.TXT"))
        return
    expect_error("not_found", client.stat, ctx.at("ALPHA.TXT"))
