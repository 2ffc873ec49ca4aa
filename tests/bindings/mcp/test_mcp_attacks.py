"""Issue 11 through the MCP door: hostile tool calls and malformed JSON-RPC, and never an internal error.

One ``afi serve`` (Streamable HTTP at ``/mcp``) and one ``afi mcp`` (stdio) each take a deterministic
corpus: 1,000+ tool calls from the official SDK client with hostile arguments (traversal, NUL and
control characters, huge strings, wrong types, absurd offsets and limits, bogus cursors, broken
regexes), then raw JSON-RPC that no client would send (broken JSON, wrong envelopes, lone surrogates,
hostile headers and methods). Every answer must be a result or an AFI error other than ``internal``
(no HTTP 5xx, no JSON-RPC -32603), each within a deadline, and a normal call must work at the end.
Regex bombs run separately against a bait line: each must answer (or be refused) in seconds.
"""

from __future__ import annotations

import json
import os
import queue
import random
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from afi.errors import ERROR_CODES
from tests.support.hostile import BOMB_BAIT, REGEX_BOMBS, Tally
from tests.support.hostile_mcp import (
    INIT,
    INITIALIZED,
    PROTOCOL,
    STAT,
    Raw,
    envelopes,
    json_bytes,
    raw_http_cases,
    tool_cases,
)
from tests.support.mcp import afi_mcp_command, run, sdk
from tests.support.servers import AfiServer, serve_store

SEED = 11
CASES = 1000
DEADLINE = 20.0  # seconds one call may take before it counts as a hang
INTERNAL_ERROR = -32603
MAX_FILE = "16M"  # the workspace's per-file cap for these servers: a write far past it must be refused
# -- judging answers ---------------------------------------------------------------------------


def judge_result(result: CallToolResult) -> str | None:
    """Given a tool result, return why it is a failure (None: a result, or an AFI error other than internal)."""
    if not result.is_error:
        return None
    text = getattr(result.content[0], "text", "") if result.content else ""
    try:
        body = json.loads(text)
    except ValueError:
        return f"a tool error that is not an AFI error: {text[:200]!r}"
    code = body.get("code") if isinstance(body, dict) else None
    if code == "internal" or code not in ERROR_CODES:
        return f"tool error {code}: {body.get('message') if isinstance(body, dict) else body}"
    return None


async def call_all(client: Client, cases: list[tuple[str, dict[str, Any]]], tally: Tally) -> None:
    """Make each call with a deadline; record what is not a result or a non-internal AFI error."""
    for name, args in cases:
        tally.tried += 1
        try:
            with anyio.fail_after(DEADLINE):
                result = await client.call_tool(name, args)
        except TimeoutError:
            tally.fail((name, args), f"no answer in {DEADLINE} s")
            continue
        except MCPError as err:
            if err.error.code == INTERNAL_ERROR:
                tally.fail((name, args), f"JSON-RPC internal error: {err.error.message}")
            continue
        except Exception as err:  # the client gave up on the answer: a broken result or a dead transport
            tally.fail((name, args), f"{type(err).__name__}: {str(err)[:200]}")
            continue
        why = judge_result(result)
        if why is not None:
            tally.fail((name, args), why)


async def alive(client: Client) -> None:
    """Nothing was written far past the per-file cap, and a normal write and read back still work."""
    with anyio.fail_after(DEADLINE):
        far = await client.call_tool("afi.stat", {"path": "/files/far.bin"})
        assert far.is_error or (far.structured_content is not None and far.structured_content["size"] <= 16 << 20)
        wrote = await client.call_tool("afi.write", {"path": "/files/after.txt", "data": "still here"})
        assert not wrote.is_error, wrote.content
        read = await client.call_tool("afi.read", {"path": "/files/after.txt"})
        assert not read.is_error and read.structured_content is not None
        assert read.structured_content["data"] == "still here"


async def seed(client: Client, *, session: bool = True) -> None:
    """Write the bait line and a note (and, in a session with the fabric attached, a working block)."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("afi.write", {"path": "/files/bait.txt", "data": f"{BOMB_BAIT}\nsome text\n"}),
        ("afi.write", {"path": "/facts/seed.md", "data": "a fact about aaaa"}),
    ]
    if session:
        calls.append(("memory.insert", {"block": "core", "text": "a working line"}))
    for name, args in calls:
        result = await client.call_tool(name, args)
        assert not result.is_error, (name, result.content)


# -- raw JSON-RPC ------------------------------------------------------------------------------

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def judge_json_rpc(payload: Any) -> str | None:
    """Given a parsed JSON-RPC answer (or batch), return why it shows an internal error (None: it does not)."""
    for message in payload if isinstance(payload, list) else [payload]:
        if not isinstance(message, dict):
            return f"not a JSON-RPC message: {message!r:.200}"
        error = message.get("error")
        if isinstance(error, dict):
            data = error.get("data")
            if error.get("code") == INTERNAL_ERROR or (isinstance(data, dict) and data.get("code") == "internal"):
                return f"internal error: {error!r:.300}"
        result = message.get("result")
        if isinstance(result, dict) and result.get("isError"):
            why = judge_result(CallToolResult.model_validate(result))
            if why is not None:
                return why
    return None


def judge_http(response: httpx.Response) -> str | None:
    """Given an HTTP answer from /mcp, return why it is a failure (None: a 2xx, or a 4xx with an error body)."""
    if response.status_code >= 500:
        return f"HTTP {response.status_code}: {response.text[:200]!r}"
    if response.request.method == "HEAD":
        return None  # an answer without a body, by definition
    kind = response.headers.get("content-type", "")
    if kind.startswith("application/json") and (response.content or response.status_code >= 400):
        try:
            payload = response.json()
        except ValueError:
            return f"HTTP {response.status_code} with a body that is not JSON: {response.text[:200]!r}"
        why = judge_json_rpc(payload)
        if why is not None:
            return why
        if response.status_code >= 400 and not (isinstance(payload, dict) and isinstance(payload.get("error"), dict)):
            return f"HTTP {response.status_code} without a JSON-RPC error: {response.text[:200]!r}"
        return None
    if kind.startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:"):
                try:
                    why = judge_json_rpc(json.loads(line[5:]))
                except ValueError:
                    return f"an event that is not JSON: {line[:200]!r}"
                if why is not None:
                    return why
        return None
    if response.status_code >= 400:
        return f"HTTP {response.status_code} without an error body ({kind!r}): {response.text[:200]!r}"
    return None


# -- the servers -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    """One keyless ``afi serve`` on loopback for the module, with a 16 MiB per-file cap."""
    base = tmp_path_factory.mktemp("mcp-attacks")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AFI_MAX_FILE_SIZE", MAX_FILE)
        with serve_store(base / "afi.db", base / "files") as server:
            yield server


def stdio_client(db: Path, root: Path) -> Client:
    command = afi_mcp_command(db, root)
    environment = {**os.environ, "AFI_MAX_FILE_SIZE": MAX_FILE}
    return Client(StdioServerParameters(command=command[0], args=command[1:], env=environment), cache=None)


# -- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_hostile_tool_calls_over_streamable_http(served: AfiServer, mode: str) -> None:
    """``legacy``: a 2025 session, with the fabric's memory.* tools; ``auto``: the 2026 revision the SDK picks."""
    tally = Tally(f"MCP Streamable HTTP tool calls ({mode})")
    cases = tool_cases(SEED if mode == "legacy" else SEED + 4, CASES)

    async def body() -> None:
        async with sdk(served.url + "/mcp", mode=mode) as client:
            await seed(client, session=mode == "legacy")
            await call_all(client, cases, tally)
            await alive(client)

    run(body)
    print(tally.report())
    assert tally.tried >= CASES
    assert not tally.failures, tally.report()


def test_hostile_tool_calls_over_stdio(tmp_path: Path) -> None:
    tally = Tally("MCP stdio tool calls")
    cases = tool_cases(SEED + 1, CASES)

    async def body() -> None:
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(stdio_client(tmp_path / "afi.db", tmp_path / "files"))
            await seed(client)
            await call_all(client, cases, tally)
            await alive(client)

    run(body)
    print(tally.report())
    assert tally.tried >= CASES
    assert not tally.failures, tally.report()


def _send(http: httpx.Client, case: Raw, session: str) -> httpx.Response:
    headers = dict(ACCEPT)
    if case.session:
        headers["mcp-session-id"] = session
        headers["mcp-protocol-version"] = PROTOCOL
    headers.update(case.headers)
    sent = {name: value.encode("utf-8") for name, value in headers.items()}  # raw bytes: not always ASCII
    return http.request(case.method, case.url, content=case.body, headers=sent)


def open_raw_session(http: httpx.Client) -> str:
    opened = http.post("/mcp", json=INIT, headers=ACCEPT)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    headers = {**ACCEPT, "mcp-session-id": session, "mcp-protocol-version": PROTOCOL}
    assert http.post("/mcp", json=INITIALIZED, headers=headers).status_code == 202
    return session


def test_malformed_json_rpc_over_streamable_http(served: AfiServer) -> None:
    tally = Tally("MCP Streamable HTTP raw requests")
    cases = raw_http_cases(random.Random(SEED + 2))
    with httpx.Client(base_url=served.url, timeout=DEADLINE) as http:
        session = open_raw_session(http)
        for case in cases:
            tally.tried += 1
            try:
                response = _send(http, case, session)
            except httpx.TimeoutException:
                tally.fail(case, f"no answer in {DEADLINE} s")
                continue
            except httpx.LocalProtocolError:  # h11 will not put it on the wire (a control byte in a header)
                tally.tried -= 1
                continue
            why = judge_http(response)
            if why is not None:
                tally.fail(case, why)
        after = _send(http, Raw(json_bytes(STAT)), session)
        assert after.status_code == 200 and judge_http(after) is None, after.text
        assert "result" in after.json(), after.text
    print(tally.report())
    assert tally.tried >= 500
    assert not tally.failures, tally.report()


class StdioPeer:
    """``afi mcp`` driven line by line, for frames the SDK client would never write."""

    def __init__(self, db: Path, root: Path) -> None:
        environment = {**os.environ, "AFI_MAX_FILE_SIZE": MAX_FILE}
        self.process = subprocess.Popen(
            afi_mcp_command(db, root),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.pumps = [
            threading.Thread(target=self._pump, daemon=True),
            threading.Thread(target=self._drain, daemon=True),
        ]
        for pump in self.pumps:
            pump.start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in iter(self.process.stdout.readline, b""):
            self.lines.put(line)

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for _ in iter(self.process.stderr.readline, b""):
            pass

    def send(self, frame: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(frame + b"\n")
        self.process.stdin.flush()

    def until(self, rid: str) -> list[Any]:
        """Read answers up to and including the one with id ``rid``; raise TimeoutError when it does not come."""
        seen: list[Any] = []
        deadline = time.monotonic() + DEADLINE
        while True:
            line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            try:
                message = json.loads(line)
            except ValueError:
                message = {"not json": line[:200].decode("utf-8", "replace")}
            seen.append(message)
            if isinstance(message, dict) and message.get("id") == rid:
                return seen

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        for pump in self.pumps:
            pump.join(5)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def test_malformed_json_rpc_over_stdio(tmp_path: Path) -> None:
    tally = Tally("MCP stdio raw frames")
    bodies = envelopes(random.Random(SEED + 3), CASES)
    peer = StdioPeer(tmp_path / "afi.db", tmp_path / "files")
    try:
        peer.send(json_bytes(INIT))
        assert "result" in peer.until(0)[-1]
        peer.send(json_bytes(INITIALIZED))
        for number, body in enumerate(bodies):
            tally.tried += 1
            sync = f"sync-{number}"
            peer.send(body)
            peer.send(json_bytes({"jsonrpc": "2.0", "id": sync, "method": "ping"}))
            try:
                answers = peer.until(sync)
            except queue.Empty:
                tally.fail(body, f"no answer in {DEADLINE} s (the server is {peer.process.poll() or 'running'})")
                break
            why = judge_json_rpc(answers)
            if why is not None:
                tally.fail(body, why)
        peer.send(json_bytes(STAT))
        after = peer.until(1)[-1]
        assert "result" in after and not after["result"].get("isError"), after
    finally:
        peer.close()
    print(tally.report())
    assert tally.tried >= CASES
    assert not tally.failures, tally.report()


BOMB_SECONDS = 10.0


def test_regex_bombs_answer_in_seconds(served: AfiServer) -> None:
    """Last in the module: a bomb that hangs the server leaves it wedged, so the first hang ends the test."""
    tally = Tally("MCP regex bombs")

    async def body() -> None:
        async with sdk(served.url + "/mcp", mode="legacy") as client:
            await seed(client)
            for bomb in REGEX_BOMBS:
                for args in (
                    {"query": {"regex": bomb}, "path": "/files"},
                    {"query": {"regex": bomb, "flags": "i"}, "path": "/files/bait.txt"},
                    {"query": {"regex": bomb}},
                ):
                    tally.tried += 1
                    try:
                        with anyio.fail_after(BOMB_SECONDS):
                            result = await client.call_tool("afi.search", args)
                    except TimeoutError:
                        tally.fail(args, f"no answer in {BOMB_SECONDS} s: the server is stuck on it")
                        return
                    why = judge_result(result)
                    if why is not None:
                        tally.fail(args, why)
            await alive(client)

    run(body)
    print(tally.report())
    assert not tally.failures, tally.report()
