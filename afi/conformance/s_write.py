"""Scenarios: the level-3 verbs (write, mkdir, delete, move) and note round trips."""

from __future__ import annotations

from ..clients.base import AfiClient
from ..errors import NotFound
from ._base import Context, check, expect_error, scenario


def _exists(client: AfiClient, path: str) -> bool:
    try:
        client.stat(path)
    except NotFound:
        return False
    return True


@scenario("write.create", "write creates a file; the entry and stat agree", profile=3, verb="write")
def write_create(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    path = ctx.at("w-create.txt")
    entry = client.write(path, b"hello\n", create_only=True)
    check(entry.path == path and entry.type == "file" and entry.size == 6, f"write returned {entry}")
    check(client.stat(path).size == 6, "stat disagrees with the written size")
    check(client.read(path).data == b"hello\n", "the file does not read back")


@scenario("write.overwrite", "write replaces the whole content", profile=3, verb="write")
def write_overwrite(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    path = ctx.at("w-over.txt")
    client.write(path, b"a long first version\n")
    client.write(path, b"short\n")
    check(client.read(path).data == b"short\n", f"read {client.read(path).data!r}")


@scenario("write.append", "append adds to the end", profile=3, verb="write")
def write_append(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    path = ctx.at("w-append.txt")
    client.write(path, b"one\n")
    entry = client.write(path, b"two\n", append=True)
    check(client.read(path).data == b"one\ntwo\n", f"read {client.read(path).data!r}")
    check(entry.size == 8, f"the entry says {entry.size} bytes")


@scenario("write.create_only", "create_only on an existing path is conflict; nothing changes", profile=3, verb="write")
def write_create_only(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    expect_error("conflict", client.write, ctx.at("alpha.txt"), b"clobbered", create_only=True)
    check(client.read(ctx.at("alpha.txt")).data == ctx.state["alpha"], "a refused write changed the file")


@scenario("write.etag_changes", "the etag changes when the content does", profile=3, verb="write")
def write_etag_changes(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    path = ctx.at("w-etag.txt")
    first = client.write(path, b"v1\n")
    second = client.write(path, b"v2\n")
    check(first.etag and second.etag, "write returned no etag")
    check(first.etag != second.etag, f"the etag stayed {first.etag!r} across a change")
    check(client.stat(path).etag == second.etag, "stat's etag differs from the last write's")


@scenario("write.if_match", "if_match: the current etag writes, a stale one is conflict", profile=3, verb="write")
def write_if_match(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    path = ctx.at("w-match.txt")
    stale = client.write(path, b"v1\n").etag
    fresh = client.write(path, b"v2\n").etag
    assert stale is not None and fresh is not None
    expect_error("conflict", client.write, path, b"lost update\n", if_match=stale)
    check(client.read(path).data == b"v2\n", "a stale if_match changed the file")
    client.write(path, b"v3\n", if_match=fresh)
    check(client.read(path).data == b"v3\n", "a current if_match did not write")


@scenario(
    "write.read_only_area", "writing the manifest is refused; it stays as it was", profile=3, verb="write", data=False
)
def write_read_only(client: AfiClient, ctx: Context) -> None:
    before = client.manifest().provider
    expect_error(("forbidden", "unsupported"), client.write, "/.afi/manifest.json", b"{}")
    check(client.manifest().provider == before, "the manifest changed")


@scenario("write.note_roundtrip", "a note written reads back with its content", profile=3, verb="write")
def write_note(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    path = ctx.note("roundtrip")
    body = f"The conformance kit wrote this note ({ctx.marker}).\n"
    entry = client.write(path, body.encode())
    check(entry.path == path and entry.type == "file", f"write returned {entry}")
    text = client.read(path).data.decode("utf-8")
    check(body.strip() in text, f"the note reads back as {text[:200]!r}")
    check(any(e.path == path for e in client.list("/facts").entries), "the note is not listed in /facts")


@scenario("mkdir.basic", "mkdir makes an empty directory", profile=3, verb="mkdir")
def mkdir_basic(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    entry = client.mkdir(ctx.at("m-basic"))
    check(entry.type == "directory", f"mkdir returned {entry}")
    check(client.list(ctx.at("m-basic")).entries == [], "a new directory is not empty")


@scenario("mkdir.parents", "mkdir without parents needs the parent; with parents makes them", profile=3, verb="mkdir")
def mkdir_parents(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    deep = ctx.at("m-deep", "b", "c")
    expect_error(("not_found", "conflict", "invalid_path"), client.mkdir, deep)
    check(not _exists(client, ctx.at("m-deep")), "a refused mkdir left a parent behind")
    client.mkdir(deep, parents=True)
    check(client.stat(deep).type == "directory", "mkdir with parents did not make the path")


@scenario("mkdir.existing", "mkdir of an existing directory is conflict", profile=3, verb="mkdir")
def mkdir_existing(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    expect_error("conflict", client.mkdir, ctx.at("sub"))


@scenario("delete.file", "delete removes a file", profile=3, verb="delete")
def delete_file(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    path = ctx.at("d-file.txt")
    client.write(path, b"bye\n")
    result = client.delete(path)
    check(result.deleted >= 1, f"deleted is {result.deleted}")
    expect_error("not_found", client.stat, path)


@scenario("delete.non_empty", "deleting a non-empty directory without recursive is conflict", profile=3, verb="delete")
def delete_non_empty(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    expect_error("conflict", client.delete, ctx.at("sub"))
    check(client.read(ctx.at("sub", "gamma.md")).data == ctx.state["gamma"], "a refused delete changed the tree")


@scenario("delete.recursive", "recursive delete removes a tree", profile=3, verb="delete")
def delete_recursive(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    client.mkdir(ctx.at("d-tree", "x"), parents=True)
    client.write(ctx.at("d-tree", "x", "f.txt"), b"f\n")
    client.delete(ctx.at("d-tree"), recursive=True)
    expect_error("not_found", client.stat, ctx.at("d-tree"))


@scenario("delete.missing", "deleting a missing path is not_found", profile=3, verb="delete")
def delete_missing(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    expect_error("not_found", client.delete, ctx.at("never-was.txt"))


@scenario("delete.note", "deleting a note forgets it", profile=3, verb="delete")
def delete_note(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    path = ctx.note("forget-me")
    client.write(path, b"A note the kit forgets at once.\n")
    client.delete(path)
    expect_error("not_found", client.stat, path)
    check(all(e.path != path for e in client.list("/facts").entries), "a forgotten note is still listed")


@scenario("move.rename", "move renames: the source is gone, the destination holds the bytes", profile=3, verb="move")
def move_rename(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    source, dest = ctx.at("mv-a.txt"), ctx.at("mv-b.txt")
    client.write(source, b"moving\n")
    entry = client.move(source, dest)
    check(entry.path == dest, f"move returned {entry.path}")
    expect_error("not_found", client.stat, source)
    check(client.read(dest).data == b"moving\n", "the destination does not hold the moved bytes")


@scenario("move.conflict", "move onto an existing path without overwrite is conflict", profile=3, verb="move")
def move_conflict(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    source, dest = ctx.at("mv-c.txt"), ctx.at("mv-d.txt")
    client.write(source, b"source\n")
    client.write(dest, b"dest\n")
    expect_error("conflict", client.move, source, dest)
    check(client.read(source).data == b"source\n" and client.read(dest).data == b"dest\n", "a refused move changed")


@scenario("move.overwrite", "move with overwrite replaces the destination", profile=3, verb="move")
def move_overwrite(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    source, dest = ctx.at("mv-e.txt"), ctx.at("mv-f.txt")
    client.write(source, b"winner\n")
    client.write(dest, b"loser\n")
    client.move(source, dest, overwrite=True)
    check(client.read(dest).data == b"winner\n", "overwrite kept the old destination")
    expect_error("not_found", client.stat, source)


@scenario("move.missing", "moving a missing path is not_found", profile=3, verb="move")
def move_missing(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    expect_error("not_found", client.move, ctx.at("ghost.txt"), ctx.at("ghost2.txt"))
