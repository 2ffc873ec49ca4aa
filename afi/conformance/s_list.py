"""Scenarios: list (order, direct children, paging, glob, limits)."""

from __future__ import annotations

from ..clients.base import AfiClient
from ..model import Entry
from ._base import Context, check, expect_error, scenario


def _all(client: AfiClient, path: str, limit: int, glob: str | None = None) -> list[Entry]:
    entries: list[Entry] = []
    cursor: str | None = None
    for _ in range(1000):
        page = client.list(path, limit=limit, cursor=cursor, glob=glob)
        check(len(page.entries) <= limit, f"a page of limit {limit} held {len(page.entries)} entries")
        entries.extend(page.entries)
        cursor = page.next_cursor
        if not cursor:
            return entries
    raise AssertionError("paging did not end after 1000 pages")


@scenario("list.root", "list / returns direct children of /, sorted", verb="list", data=False)
def list_root(client: AfiClient, ctx: Context) -> None:
    paths = [e.path for e in client.list("/").entries]
    check(paths, "the root lists nothing")
    check(paths == sorted(paths), f"not sorted by path: {paths}")
    check(all(p.count("/") == 1 and p != "/" for p in paths), f"not direct children of /: {paths}")


@scenario("list.sorted_direct", "list returns exactly the direct children, sorted by path", verb="list")
def list_sorted_direct(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    paths = [e.path for e in client.list(ctx.root).entries]
    want = sorted(ctx.at(n) for n in ("alpha.txt", "beta.txt", "bytes.bin", "page", "sub"))
    check(paths == want, f"expected {want}, got {paths}")


@scenario("list.entry_shape", "listed entries agree with stat", verb="list")
def list_entry_shape(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    for entry in client.list(ctx.root).entries:
        alone = client.stat(entry.path)
        check(
            (alone.type, alone.size, alone.content_type) == (entry.type, entry.size, entry.content_type),
            f"{entry.path}: list says {entry.type}/{entry.size}/{entry.content_type}, stat says "
            f"{alone.type}/{alone.size}/{alone.content_type}",
        )


@scenario("list.paging", "paging with cursors: no duplicates, no gaps, same order", verb="list")
def list_paging(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    whole = [e.path for e in client.list(ctx.at("page")).entries]
    check(len(whole) == 7, f"expected 7 entries in page/, got {len(whole)}")
    for size in (1, 2, 3):
        paged = [e.path for e in _all(client, ctx.at("page"), size)]
        check(paged == whole, f"pages of {size} gave {paged}, one page gave {whole}")


@scenario("list.limit", "limit caps a page and a cursor follows", verb="list")
def list_limit(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    page = client.list(ctx.at("page"), limit=3)
    check(len(page.entries) == 3, f"limit 3 gave {len(page.entries)} entries")
    check(page.next_cursor, "no next_cursor though 4 entries remain")
    last = client.list(ctx.at("page"), limit=7)
    check(len(last.entries) == 7 and not last.next_cursor, "a page holding everything still has a cursor")


@scenario("list.bad_limit", "a zero or negative limit is invalid_path", verb="list")
def list_bad_limit(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    expect_error("invalid_path", client.list, ctx.root, limit=0)
    expect_error("invalid_path", client.list, ctx.root, limit=-5)


@scenario("list.glob", "glob filters child names (shell patterns: * ? [a-z] [!a])", verb="list")
def list_glob(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    paths = [e.path for e in client.list(ctx.root, glob="*.txt").entries]
    check(paths == [ctx.at("alpha.txt"), ctx.at("beta.txt")], f"glob *.txt gave {paths}")
    paged = [e.path for e in _all(client, ctx.at("page"), 2, glob="p0[246].txt")]
    check(paged == [ctx.at("page", f"p0{i}.txt") for i in (2, 4, 6)], f"glob with paging gave {paged}")


@scenario("list.file", "listing a file is invalid_path", verb="list")
def list_file(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    expect_error("invalid_path", client.list, ctx.at("alpha.txt"))


@scenario("list.not_found", "listing a missing directory is not_found", verb="list")
def list_not_found(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    expect_error("not_found", client.list, ctx.at("no-such-dir"))
