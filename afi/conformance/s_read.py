"""Scenarios: read (whole, slices, eof, past the end, directories, bytes)."""

from __future__ import annotations

from ..clients.base import AfiClient
from ._base import Context, check, expect_error, scenario


@scenario("read.whole", "read returns the bytes written, with eof", profile=1, verb="read")
def read_whole(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    result = client.read(ctx.at("alpha.txt"))
    check(result.data == ctx.state["alpha"], f"read {result.data[:60]!r}…, wrote {ctx.state['alpha'][:60]!r}…")
    check(result.eof, "eof is false after reading the whole file")


@scenario("read.slice", "offset and length select a slice; eof is false before the end", profile=1, verb="read")
def read_slice(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    result = client.read(ctx.at("alpha.txt"), offset=6, length=4)
    check(result.data == ctx.state["alpha"][6:10], f"offset 6 length 4 gave {result.data!r}")
    check(not result.eof, "eof is true in the middle of the file")


@scenario("read.to_end", "an offset without length reads to the end", profile=1, verb="read")
def read_to_end(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    data = ctx.state["alpha"]
    result = client.read(ctx.at("alpha.txt"), offset=len(data) - 10)
    check(result.data == data[-10:] and result.eof, f"the last 10 bytes read as {result.data!r}, eof={result.eof}")


@scenario("read.past_end", "an offset past the end returns no bytes and eof", profile=1, verb="read")
def read_past_end(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    result = client.read(ctx.at("alpha.txt"), offset=len(ctx.state["alpha"]) + 100, length=10)
    check(result.data == b"" and result.eof, f"got {result.data!r}, eof={result.eof}")


@scenario("read.directory", "reading a directory is invalid_path", profile=1, verb="read")
def read_directory(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    expect_error("invalid_path", client.read, ctx.at("sub"))
    expect_error("invalid_path", client.read, "/")


@scenario("read.not_found", "reading a missing file is not_found", profile=1, verb="read")
def read_not_found(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    expect_error("not_found", client.read, ctx.at("nope.txt"))


@scenario("read.binary", "every byte value survives a round trip", profile=1, verb="read")
def read_binary(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    result = client.read(ctx.at("bytes.bin"))
    check(result.data == bytes(range(256)), f"read {len(result.data)} bytes that differ from the 256 written")


@scenario("read.content_type", "content types follow the name (.md markdown, .txt plain)", profile=1, verb="read")
def read_content_type(client: AfiClient, ctx: Context) -> None:
    ctx.need_data()
    md = client.read(ctx.at("sub", "gamma.md")).content_type
    txt = client.read(ctx.at("alpha.txt")).content_type
    check(md.startswith("text/markdown"), f".md reads as {md!r}")
    check(txt.startswith("text/plain"), f".txt reads as {txt!r}")
