"""The stdio transport of ``afi mcp``: newline-delimited JSON-RPC on the event loop, no thread per line.

The SDK's :func:`mcp.server.stdio.stdio_server` reads each line and writes (then flushes) each reply
in a worker thread: three thread hops per tool call, a third of a small call's latency on a busy
machine. :func:`stdio_streams` reads and writes the same frames through asyncio pipe transports
instead, so a line is parsed and a reply written without leaving the event loop.

While serving the process's own stdio, fd 0 reads the null device and fd 1 writes to stderr (as the
SDK does), so a stray ``print`` or a child process cannot corrupt the wire; both come back on exit,
blocking again. Standard streams that are not pipes or sockets (a terminal, /dev/null, a regular file
as in ``afi mcp < requests.jsonl``) are served by the SDK's thread-based transport instead.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import selectors
import stat
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from types import TracebackType
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

__all__ = ["StdioReader", "StdioWriter", "stdio_streams"]

LINE_LIMIT = 1 << 30  # one JSON-RPC frame; the SDK's reader has no limit at all


class StdioReader:
    """The server's read stream: one :class:`SessionMessage` (or the parse error) per line of the pipe."""

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.BaseTransport) -> None:
        self._reader = reader
        self._transport = transport

    async def receive(self) -> SessionMessage | Exception:
        """Return the next frame; raise :class:`anyio.EndOfStream` when the peer closed the pipe."""
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as end:
                line = end.partial  # a last frame without its newline still counts, as with the SDK
                if not line.strip():
                    raise anyio.EndOfStream from None
            except (asyncio.LimitOverrunError, ValueError) as err:
                raise anyio.BrokenResourceError(f"a JSON-RPC line longer than {LINE_LIMIT} bytes") from err
            if line.strip():
                break
        try:
            return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
        except Exception as err:  # the server answers a bad frame; the stream goes on
            return err

    async def aclose(self) -> None:
        self._transport.close()

    def __aiter__(self) -> StdioReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> StdioReader:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _WriteProtocol(asyncio.Protocol):
    """Flow control for the write pipe: ``drain`` waits while the pipe's buffer is over its high mark."""

    def __init__(self) -> None:
        self._resumed: asyncio.Future[None] | None = None
        self.lost: BaseException | None = None
        self.closed = asyncio.get_running_loop().create_future()

    def pause_writing(self) -> None:
        self._resumed = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
        self._resumed = None

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = exc or BrokenPipeError("the MCP client closed stdout")
        self.resume_writing()
        if not self.closed.done():
            self.closed.set_result(None)

    async def drain(self) -> None:
        if self.lost is not None:
            raise anyio.BrokenResourceError("the MCP client stopped reading") from self.lost
        if self._resumed is not None:
            await asyncio.shield(self._resumed)


class StdioWriter:
    """The server's write stream: each message one line of JSON, written at once, drained when full."""

    def __init__(self, transport: asyncio.WriteTransport, protocol: _WriteProtocol) -> None:
        self._transport = transport
        self._protocol = protocol

    async def send(self, item: SessionMessage, /) -> None:
        if self._transport.is_closing():
            raise anyio.ClosedResourceError
        frame = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        self._transport.write(frame.encode("utf-8") + b"\n")
        await self._protocol.drain()

    async def aclose(self) -> None:
        """Close after what is buffered has been written (or the peer has gone)."""
        if not self._transport.is_closing():
            self._transport.close()
        with anyio.move_on_after(5):
            await asyncio.shield(self._protocol.closed)

    async def __aenter__(self) -> StdioWriter:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


async def _connect(stdin: int, stdout: int) -> tuple[StdioReader, StdioWriter]:
    """Given two descriptors (pipes, sockets or terminals), return the streams over them."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    read_file = os.fdopen(stdin, "rb", buffering=0, closefd=False)
    write_file = os.fdopen(stdout, "wb", buffering=0, closefd=False)
    read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), read_file)
    try:
        write_transport, protocol = await loop.connect_write_pipe(_WriteProtocol, write_file)
    except BaseException:
        read_transport.close()
        raise
    return StdioReader(reader, read_transport), StdioWriter(write_transport, protocol)


def _claim() -> tuple[int, int]:
    """Move the process's stdin/stdout to private descriptors; leave /dev/null and stderr in their place."""
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    return wire_in, wire_out


def _release(wire_in: int, wire_out: int) -> None:
    """Put the wire back on fd 0 and fd 1 and drop the private descriptors."""
    for wire, fd in ((wire_in, 0), (wire_out, 1)):
        with suppress(OSError):
            os.dup2(wire, fd)
        with suppress(OSError):
            os.close(wire)


def _pollable(fd: int, events: int) -> bool:
    """True for a pipe or socket the event loop can watch.

    Terminals are left to the thread-based transport: the loop would make the terminal's file
    description non-blocking for the shell that shares it. Regular files and /dev/null cannot be watched.
    """
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return False
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, events)
        except (OSError, ValueError):
            return False
    return True


@asynccontextmanager
async def stdio_streams(stdin: int | None = None, stdout: int | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """Yield ``(read_stream, write_stream)`` for :meth:`mcp.server.lowlevel.Server.run` over stdio.

    Args:
        stdin, stdout: descriptors to serve instead of the process's own (which are then claimed:
            fd 0 reads /dev/null and fd 1 goes to stderr until the block exits). The caller keeps
            ownership of descriptors it passes.
    """
    own = stdin is None and stdout is None
    in_fd, out_fd = 0 if stdin is None else stdin, 1 if stdout is None else stdout
    if not (_on_asyncio() and _pollable(in_fd, selectors.EVENT_READ) and _pollable(out_fd, selectors.EVENT_WRITE)):
        async with _threaded(None if own else (in_fd, out_fd)) as streams:
            yield streams
        return
    wire_in, wire_out = _claim() if own else (in_fd, out_fd)
    blocking = os.get_blocking(wire_in), os.get_blocking(wire_out)
    try:
        async with AsyncExitStack() as stack:
            reader, writer = await _connect(wire_in, wire_out)
            stack.push_async_callback(reader.aclose)
            stack.push_async_callback(writer.aclose)
            yield reader, writer
    finally:
        # The pipe transports made the file descriptions non-blocking; whoever shares them expects otherwise.
        for fd, was in zip((wire_in, wire_out), blocking, strict=True):
            with suppress(OSError):
                os.set_blocking(fd, was)
        if own:
            _release(wire_in, wire_out)


@asynccontextmanager
async def _threaded(fds: tuple[int, int] | None) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's thread-per-line transport, for what is not a pipe or socket (and loops other than asyncio).

    Lines are read with ``errors="surrogateescape"``, not the SDK's ``"replace"``: a byte that is not
    UTF-8 stays one, so the line is refused as JSON-RPC (as the event-loop transport refuses it)
    instead of reaching a verb with U+FFFD where the byte was (``bad\\xff.txt`` stored as ``bad�.txt``).
    """
    from mcp.server.stdio import stdio_server

    if fds is None:
        with open(0, encoding="utf-8", errors="surrogateescape", closefd=False) as text_in:
            async with stdio_server(stdin=anyio.wrap_file(text_in)) as (reader, writer), _closing(reader, writer):
                yield reader, writer
        return
    with (
        open(fds[0], encoding="utf-8", errors="surrogateescape", closefd=False) as text_in,
        open(fds[1], "w", encoding="utf-8", closefd=False) as text_out,
    ):
        async with (
            stdio_server(anyio.wrap_file(text_in), anyio.wrap_file(text_out)) as (reader, writer),
            _closing(reader, writer),
        ):
            yield reader, writer


@asynccontextmanager
async def _closing(reader: Any, writer: Any) -> AsyncIterator[None]:
    # The SDK's writer task ends only once the write stream is closed: Server.run closes both, a caller may not.
    try:
        yield
    finally:
        await writer.aclose()
        await reader.aclose()


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
