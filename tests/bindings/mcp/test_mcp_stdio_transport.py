"""The event-loop stdio transport of ``afi mcp`` (:mod:`afi.bindings.mcp.stdio`), over real pipes.

A real MCP server (the binding over a real store) serves two ``os.pipe()`` pairs from a thread;
the test speaks newline-delimited JSON-RPC to it as an MCP client's transport would.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCNotification

from afi.bindings.mcp import McpBinding, stdio_info
from afi.bindings.mcp.stdio import StdioReader, StdioWriter, stdio_streams
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from tests.support.mcp import afi_mcp_command

HELLO = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}


@dataclass
class Wire:
    """The client's ends of the two pipes, and what the server thread left behind."""

    to_server: BinaryIO
    from_server: BinaryIO
    server_fds: tuple[int, int]
    errors: list[BaseException] = field(default_factory=list)
    seen: dict[str, Any] = field(default_factory=dict)

    def send(self, message: dict[str, Any]) -> None:
        self.to_server.write(json.dumps(message).encode() + b"\n")
        self.to_server.flush()

    def reply(self) -> dict[str, Any]:
        line = self.from_server.readline()
        assert line.endswith(b"\n"), line[-200:]
        body: dict[str, Any] = json.loads(line)
        return body

    def call(self, id_: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.send(
            {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        )
        answer = self.reply()
        assert answer["id"] == id_, answer
        result: dict[str, Any] = answer["result"]
        return result

    def hello(self) -> None:
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": HELLO})
        assert self.reply()["result"]["serverInfo"]["name"] == "afi-memory"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


@contextmanager
def served(tmp_path: Path) -> Iterator[Wire]:
    """Serve the MCP binding over fresh pipes from a thread; on exit close the client's side and join."""
    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    binding = McpBinding(provider, default_info=stdio_info(Caller("local"), "tools", "t"), inline_reads=True)
    server_in, client_out = os.pipe()
    client_in, server_out = os.pipe()
    wire = Wire(os.fdopen(client_out, "wb"), os.fdopen(client_in, "rb"), (server_in, server_out))

    async def serve() -> None:
        async with stdio_streams(server_in, server_out) as (reader, writer):
            wire.seen["streams"] = (type(reader), type(writer))
            await binding.server.run(reader, writer, binding.server.create_initialization_options())

    def thread_main() -> None:
        try:
            anyio.run(serve)
        except BaseException as err:
            wire.errors.append(err)

    thread = threading.Thread(target=thread_main, daemon=True)
    thread.start()
    try:
        yield wire
    finally:
        if not wire.to_server.closed:
            wire.to_server.close()
        thread.join(20)
        wire.seen["alive"] = thread.is_alive()
        wire.seen["blocking"] = (os.get_blocking(server_in), os.get_blocking(server_out))
        wire.from_server.close()
        os.close(server_in)
        os.close(server_out)


def test_calls_are_answered_over_pipes_by_the_event_loop_transport(tmp_path: Path) -> None:
    with served(tmp_path) as wire:
        wire.hello()
        written = wire.call(1, "afi.write", {"path": "/files/notes/a.txt", "data": "one\ntwo needle\n"})
        assert written["structuredContent"]["size"] == 15
        read = wire.call(2, "afi.read", {"path": "/files/notes/a.txt"})
        assert read["content"][0]["text"] == "one\ntwo needle\n" and read["isError"] is False
        found = wire.call(3, "afi.search", {"query": "needle", "path": "/files"})
        assert [(m["path"], m["line"]) for m in found["structuredContent"]["matches"]] == [("/files/notes/a.txt", 2)]
        missing = wire.call(4, "afi.stat", {"path": "/files/nope.txt"})
        assert missing["isError"] is True and json.loads(missing["content"][0]["text"])["code"] == "not_found"
    assert wire.seen["streams"] == (StdioReader, StdioWriter)
    assert wire.errors == [] and wire.seen["alive"] is False
    assert wire.seen["blocking"] == (True, True), "the descriptors must be handed back blocking"


def test_a_bad_line_is_skipped_and_the_next_call_is_answered(tmp_path: Path) -> None:
    with served(tmp_path) as wire:
        wire.hello()
        wire.to_server.write(b"{not json\n\n   \n")
        wire.to_server.flush()
        assert wire.call(1, "afi.stat", {"path": "/"})["structuredContent"]["type"] == "directory"
    assert wire.errors == []


def test_frames_larger_than_a_pipe_buffer_pass_both_ways(tmp_path: Path) -> None:
    text = "".join(f"line {i:06d} of a long file\n" for i in range(12_000))  # ~300 KB, > 64 KiB pipe buffer
    with served(tmp_path) as wire:
        wire.hello()
        assert wire.call(1, "afi.write", {"path": "/files/big.txt", "data": text})["structuredContent"]["size"] == len(
            text
        )
        read = wire.call(2, "afi.read", {"path": "/files/big.txt"})
        assert read["content"][0]["text"] == text and read["structuredContent"]["data"] == text
    assert (tmp_path / "files" / "default" / "big.txt").read_text() == text


def test_a_client_that_stops_reading_does_not_hang_the_server(tmp_path: Path) -> None:
    with served(tmp_path) as wire:
        wire.hello()
        wire.from_server.close()  # the client is gone: replies now meet a broken pipe
        wire.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "afi.stat", "arguments": {}}})
        wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert wire.seen["alive"] is False


def test_end_of_input_ends_the_stream_after_a_last_line_without_newline(tmp_path: Path) -> None:
    server_in, client_out = os.pipe()
    client_in, server_out = os.pipe()
    os.write(client_out, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    os.close(client_out)
    received: list[Any] = []

    async def body() -> None:
        async with stdio_streams(server_in, server_out) as (reader, _):
            received.extend([item async for item in reader])

    try:
        anyio.run(body)
    finally:
        for fd in (server_in, server_out, client_in):
            os.close(fd)
    assert len(received) == 1 and isinstance(received[0], SessionMessage)
    assert isinstance(received[0].message, JSONRPCNotification)


def test_a_regular_file_is_served_by_the_threaded_transport(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    replies = tmp_path / "replies.jsonl"
    note = SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/progress"))
    kinds: list[str] = []

    async def body() -> None:
        with requests.open("rb") as source, replies.open("wb") as sink:
            async with stdio_streams(source.fileno(), sink.fileno()) as (reader, writer):
                kinds.append(type(reader).__name__)
                first = await reader.receive()
                assert isinstance(first, SessionMessage) and isinstance(first.message, JSONRPCNotification)
                assert first.message.method == "notifications/initialized"
                await writer.send(note)

    anyio.run(body)
    assert kinds and kinds[0] != "StdioReader"
    assert json.loads(replies.read_text()) == {"jsonrpc": "2.0", "method": "notifications/progress"}


def test_afi_mcp_over_a_regular_file_still_answers(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}) + "\n")
    out = tmp_path / "out.jsonl"
    with feed.open("rb") as stdin, out.open("wb") as stdout:
        done = subprocess.run(
            afi_mcp_command(tmp_path / "afi.db", tmp_path / "files"), stdin=stdin, stdout=stdout, timeout=60
        )
    assert done.returncode == 0
    answer = json.loads(out.read_text().splitlines()[0])
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "afi-memory"


def _write_call(id_: int, name: bytes) -> bytes:
    call = {"name": "afi.write", "arguments": {"path": "/files/NAME", "data": "x"}}
    line = json.dumps({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": call}).encode()
    return line.replace(b"NAME", name) + b"\n"


def test_a_path_that_is_not_utf8_writes_nothing_over_a_pipe(tmp_path: Path) -> None:
    with served(tmp_path) as wire:
        wire.hello()
        wire.to_server.write(_write_call(1, b"bad\xff.txt"))
        wire.to_server.flush()
        assert wire.call(2, "afi.stat", {"path": "/files"})["structuredContent"]["type"] == "directory"
    assert not (tmp_path / "files" / "default").exists() or not list((tmp_path / "files" / "default").iterdir())


_RECEIVE_TWO = """
import anyio
from afi.bindings.mcp.stdio import stdio_streams

async def main():
    async with stdio_streams() as (reader, _):
        for _ in range(2):
            print(type(await reader.receive()).__name__, file=__import__("sys").stderr)

anyio.run(main)
"""


def test_afi_mcps_own_stdin_hands_on_no_message_from_a_line_that_is_not_utf8(tmp_path: Path) -> None:
    """``afi mcp < requests.jsonl``: a regular file on fd 0 is read by the SDK's transport, which decoded with
    ``errors="replace"``: the write reached the verb as ``/files/bad\\uFFFD.txt``, a name the client never sent."""
    feed = tmp_path / "feed.jsonl"
    feed.write_bytes(_write_call(1, b"bad\xff.txt") + _write_call(2, b"good.txt"))
    with feed.open("rb") as stdin:
        done = subprocess.run(
            [sys.executable, "-c", _RECEIVE_TWO], stdin=stdin, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 0, done.stderr
    assert done.stderr.split() == ["ValidationError", "SessionMessage"], done.stderr


def test_the_threaded_transport_hands_on_no_message_from_a_line_that_is_not_utf8(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_write_call(1, b"bad\xff.txt") + _write_call(2, b"good.txt"))
    received: list[Any] = []

    async def body() -> None:
        with requests.open("rb") as source, (tmp_path / "replies").open("wb") as sink:
            async with stdio_streams(source.fileno(), sink.fileno()) as (reader, _):
                received.extend([await reader.receive(), await reader.receive()])

    anyio.run(body)
    assert isinstance(received[0], Exception), f"a lossy decode made a message of it: {received[0]!r:.300}"
    assert isinstance(received[1], SessionMessage)


@pytest.mark.parametrize("stdin_is_null", [True, False], ids=["stdin-devnull", "stdin-pipe"])
def test_afi_mcp_exits_cleanly_at_end_of_input(tmp_path: Path, stdin_is_null: bool) -> None:
    command = afi_mcp_command(tmp_path / "afi.db", tmp_path / "files")
    if stdin_is_null:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    else:
        done = subprocess.run(command, input=b"", capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stdout == b"", done.stderr[-2000:]


CLAIM_SCRIPT = """
import os, sys, anyio
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCNotification
from afi.bindings.mcp.stdio import StdioReader, stdio_streams

async def main():
    async with stdio_streams() as (reader, writer):
        assert isinstance(reader, StdioReader), type(reader)
        print("stray print", flush=True)
        os.write(1, b"stray write\\n")
        assert sys.stdin.read() == ""  # fd 0 reads /dev/null while the wire is claimed
        got = await reader.receive()
        await writer.send(SessionMessage(JSONRPCNotification(jsonrpc="2.0", method=got.message.method)))
    print("after", flush=True)

anyio.run(main)
"""


def test_the_wire_is_claimed_while_serving_and_handed_back_after() -> None:
    line = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
    done = subprocess.run([sys.executable, "-c", CLAIM_SCRIPT], input=line.encode(), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    lines = done.stdout.decode().splitlines()
    assert json.loads(lines[0]) == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert lines[1:] == ["after"]
    assert "stray print" in done.stderr.decode() and "stray write" in done.stderr.decode()


def test_one_socket_for_both_directions_is_served_on_the_loop() -> None:
    ours, theirs = socket.socketpair()
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    seen: list[Any] = []

    async def body() -> None:
        async with stdio_streams(ours.fileno(), ours.fileno()) as (reader, writer):
            seen.append(type(reader))
            got = await reader.receive()
            assert isinstance(got, SessionMessage)
            await writer.send(got)

    theirs.sendall(json.dumps(note).encode() + b"\n")
    try:
        anyio.run(body)
        assert json.loads(theirs.makefile("rb").readline()) == note
        assert os.get_blocking(ours.fileno())
    finally:
        ours.close()
        theirs.close()
    assert seen == [StdioReader]
