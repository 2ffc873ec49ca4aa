"""The MCP binding with today's clients: the 2026-07-28 revision the SDK client picks by default.

Driven by the official SDK client against a real ``afi serve`` (and, for paging, the binding's own
server over a real store): the fabric's ``memory.*`` tools without an MCP session, bad arguments
said plainly, refusals whose JSON-RPC message is words (the AfiError is ``data``), and the tree's
notes listed as resources, paged with the MCP cursor.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from afi.app.mcp import memory_fabric_sessions
from afi.auth.keys import KeyStore
from afi.bindings.mcp import McpBinding, stdio_info
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from tests.support.mcp import error_of, run, sdk
from tests.support.servers import AfiServer

MEMORY_TOOLS = ["view", "read", "insert", "recall", "forget"]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _answer(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content  # type: ignore[no-any-return]


def _principal(server: AfiServer, name: str) -> str:
    """The principal behind one of the server's keys."""
    keys = KeyStore(Path(str(server.db)))
    try:
        return keys.authenticate(server.tokens[name]).principal
    finally:
        keys.close()


def test_the_default_revision_offers_the_memory_tools_in_the_callers_own_session(afi_server: AfiServer) -> None:
    block = f"modern-{secrets.token_hex(3)}"
    own = "mcp-" + _principal(afi_server, "writer")

    async def body() -> None:
        async with sdk(afi_server.url + "/mcp", afi_server.tokens["writer"]) as client:  # the SDK's default era
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert len(listed) == 28
            for name in MEMORY_TOOLS:
                assert {f"memory.{name}", f"memory_{name}"} <= set(listed)
                schema = listed[f"memory.{name}"].input_schema
                assert schema["properties"]["session"]["type"] == "string"
                assert "session" not in schema.get("required", [])
            first = _answer(await client.call_tool("memory.insert", {"block": block, "text": "one"}))
            assert first["created"] is True and first["session"] == own
            named = {"block": block, "text": "two", "session": "planning"}
            second = _answer(await client.call_tool("memory_insert", named))
            assert second["created"] is False and second["session"] == "planning"
            recalled = _answer(await client.call_tool("memory.recall", {"query": "anything"}))
            assert recalled["session"] == own and "hits" in recalled
            for bad in ("a/b", " padded", ""):
                refused = error_of(await client.call_tool("memory.view", {"session": bad}))
                assert refused["code"] == "invalid_path" and "session" in refused["message"], refused
            text = (await client.call_tool("afi.read", {"path": f"/working/{block}.md"})).content[0].text  # type: ignore[union-attr]
            assert "one" in text and "two" in text
            assert not (await client.call_tool("memory.forget", {"block": block})).is_error
        async with sdk(afi_server.url + "/mcp", afi_server.tokens["reader"]) as reader:
            refused = error_of(await reader.call_tool("memory.insert", {"block": block, "text": "x"}))
            assert refused["code"] == "forbidden" and "afi:write" in refused["message"]

    run(body)


def test_a_2025_session_keeps_its_memory_tools_as_before(afi_server: AfiServer) -> None:
    async def body() -> None:
        async with sdk(afi_server.url + "/mcp", afi_server.tokens["writer"], mode="legacy") as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert len(listed) == 28
            assert "session" not in listed["memory.insert"].input_schema["properties"]
            block = f"legacy-{secrets.token_hex(3)}"
            answer = _answer(await client.call_tool("memory.insert", {"block": block, "text": "x"}))
            assert answer["created"] is True and "session" not in answer
            refused = error_of(await client.call_tool("memory.insert", {"block": block, "text": "y", "session": "s"}))
            assert refused["code"] == "invalid_path" and "'session'" in refused["message"]
            await client.call_tool("afi.delete", {"path": f"/working/{block}.md"})
        async with sdk(afi_server.url + "/mcp", afi_server.tokens["writer"]) as modern:  # after a 2025 call
            named = {"block": block, "text": "z", "session": "s"}
            assert _answer(await modern.call_tool("memory.insert", named))["session"] == "s"
            await modern.call_tool("afi.delete", {"path": f"/working/{block}.md"})

    run(body)


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("afi.read", {}, "afi.read: argument 'path' is required"),
    ("afi.read", {"path": 3}, "afi.read: argument 'path' should be a string, not 3"),
    ("afi.read", {"path": "/files/a", "offset": -1}, "afi.read: argument 'offset' should be at least 0, not -1"),
    (
        "afi.read",
        {"path": "/files/a", "bogus": 1},
        "afi.read: unknown argument 'bogus' (it takes: path, offset, length)",
    ),
    ("afi.write", {"path": "/files/a", "data": "x", "encoding": "hex"}, "argument 'encoding' should be one of"),
    ("afi.search", {"query": {"regex": 1}}, "afi.search: argument 'query.regex' should be a string, not 1"),
    ("afi.search", {"query": 5}, "afi.search: argument 'query' should be a string; or an object {regex, flags}"),
    ("afi.move", {}, "afi.move: arguments 'from', 'to' are required"),
    ("memory.insert", {"block": "b", "text": ""}, "memory.insert: argument 'text' should not be empty"),
    ("memory.recall", {"query": "x", "top_k": "3"}, "memory.recall: argument 'top_k' should be an integer, not '3'"),
]


def test_a_bad_argument_is_named_and_said_plainly(afi_server: AfiServer) -> None:
    async def body() -> None:
        for mode in ("auto", "legacy"):
            async with sdk(afi_server.url + "/mcp", afi_server.tokens["writer"], mode=mode) as client:
                for name, arguments, said in BAD:
                    error = error_of(await client.call_tool(name, arguments))
                    assert error["code"] == "invalid_path", (mode, name, error)
                    assert said in error["message"], (mode, name, error)
                    assert "bad arguments" not in error["message"] and "is not of type" not in error["message"]

    run(body)


def test_a_refusal_at_the_mcp_door_is_one_json_object(afi_server: AfiServer) -> None:
    for headers in ({}, {"Authorization": "Bearer afi_forged"}):
        response = httpx.post(afi_server.url + "/mcp", json=INIT, headers={**ACCEPT, **headers})
        assert response.status_code == 401
        error = response.json()["error"]
        assert error["data"]["code"] == "unauthorized"
        assert error["message"] == error["data"]["message"] and not error["message"].startswith("{")
        with pytest.raises(ValueError):
            json.loads(error["message"])


def _binding(tmp_path: Path, page: int) -> tuple[MemoryProvider, McpBinding]:
    provider = MemoryProvider(tmp_path / "m.db", tmp_path / "root")
    info = stdio_info(Caller("local"), "tools", "s1")
    binding = McpBinding(provider, fabric=memory_fabric_sessions(provider), default_info=info, resource_page=page)
    return provider, binding


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_resources_list_the_notes_paged_with_the_cursor(tmp_path: Path, mode: Any) -> None:
    provider, binding = _binding(tmp_path, page=3)
    owner = Caller("local")
    for name in ("coffee", "tea", "water", "juice"):
        provider.write(owner, f"/facts/{name}.md", f"The user drinks {name}.".encode())
    provider.write(owner, "/procedures/brew.md", b"Grind, then pour.")
    provider.write(owner, "/working/today.md", b"a line")
    provider.write(owner, "/files/plain.txt", b"a workspace file, not a note")

    async def body() -> None:
        async with Client(binding.server, mode=mode) as client:
            pages, cursor = [], None
            while True:
                page = await client.list_resources(cursor=cursor)
                assert len(page.resources) <= 3
                pages.append([resource.uri for resource in page.resources])
                cursor = page.next_cursor
                if cursor is None:
                    break
            uris = [uri for each in pages for uri in each]
            assert uris == [
                "afi://manifest.json",
                "afi://facts/coffee.md",
                "afi://facts/juice.md",
                "afi://facts/tea.md",
                "afi://facts/water.md",
                "afi://procedures/brew.md",
                "afi://working/today.md",
            ]
            assert len(pages) == 3
            read = await client.read_resource("afi://facts/tea.md")
            assert "The user drinks tea." in read.contents[0].text  # type: ignore[union-attr]
            with pytest.raises(MCPError) as caught:
                await client.list_resources(cursor="not-a-cursor")
            assert caught.value.data["code"] == "invalid_path" and "cursor" in caught.value.error.message

    run(body)


def test_resources_list_the_notes_of_a_real_server(open_server: AfiServer) -> None:
    tag = secrets.token_hex(3)
    for area in ("facts", "procedures"):
        written = httpx.put(open_server.url + "/afi/write", params={"path": f"/{area}/res-{tag}.md"}, content=b"x y")
        assert written.status_code == 200, written.text
    httpx.put(open_server.url + "/afi/write", params={"path": f"/files/res-{tag}.txt"}, content=b"not a note")

    async def body() -> None:
        for mode in ("auto", "legacy"):
            async with sdk(open_server.url + "/mcp", mode=mode) as client:
                uris, cursor = [], None
                while True:
                    page = await client.list_resources(cursor=cursor)
                    uris += [resource.uri for resource in page.resources]
                    if (cursor := page.next_cursor) is None:
                        break
                assert uris[0] == "afi://manifest.json"
                assert {f"afi://facts/res-{tag}.md", f"afi://procedures/res-{tag}.md"} <= set(uris), mode
                assert not any(uri.startswith("afi://files/") for uri in uris)

    run(body)
