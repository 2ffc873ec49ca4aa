"""The MCP binding over Streamable HTTP, against a real ``afi serve`` with API keys, through real clients."""

from __future__ import annotations

import base64
import json
import secrets
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from afi.clients import HttpClient
from afi.clients.mcp import McpClient
from afi.conformance import run_kit
from tests.support.mcp import error_of, run, sdk
from tests.support.servers import AfiServer

AFI_TOOLS = ["manifest", "stat", "list", "read", "search", "write", "mkdir", "delete", "move"]
MEMORY_TOOLS = ["view", "read", "insert", "recall", "forget"]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def mcp_url(server: AfiServer) -> str:
    return server.url + "/mcp"


def outcomes(report: Any) -> dict[str, str]:
    return {o.id: o.result for o in report.outcomes}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_conformance_kit_passes_over_streamable_http(afi_server: AfiServer, mode: str) -> None:
    url, tokens = mcp_url(afi_server), afi_server.tokens
    clients = [
        McpClient.http(url, tokens["writer"], mode=mode),
        McpClient.http(url, tokens["other"], mode=mode),
        McpClient.http(url, mode=mode),
        McpClient.http(url, "afi_" + secrets.token_urlsafe(32), mode=mode),
    ]
    try:
        report = run_kit(clients[0], other=clients[1], anonymous=clients[2], forged=clients[3])
    finally:
        for client in clients:
            client.close()
    assert report.failures() == []
    http = [HttpClient(afi_server.url, tokens["writer"]), HttpClient(afi_server.url, tokens["other"])]
    http += [HttpClient(afi_server.url), HttpClient(afi_server.url, "afi_" + secrets.token_urlsafe(32))]
    try:
        over_http = run_kit(http[0], other=http[1], anonymous=http[2], forged=http[3])
    finally:
        for each in http:
            each.close()
    passed_http = {k for k, v in outcomes(over_http).items() if v == "pass"}
    passed_mcp = {k for k, v in outcomes(report).items() if v == "pass"}
    assert passed_http <= passed_mcp, sorted(passed_http - passed_mcp)
    for must in ("auth.missing", "auth.bad", "cloak.search", "setup", "cleanup"):
        assert outcomes(report)[must] == "pass", must


def test_the_sdk_client_lists_and_calls_every_tool(afi_server: AfiServer) -> None:
    tag = secrets.token_hex(3)

    async def body() -> None:
        async with sdk(mcp_url(afi_server), afi_server.tokens["writer"], mode="legacy") as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            for verb in AFI_TOOLS:
                assert {f"afi.{verb}", f"afi_{verb}"} <= set(listed)
                tool = listed[f"afi.{verb}"]
                assert tool.output_schema is not None and tool.input_schema["type"] == "object"
                assert tool.annotations is not None and tool.annotations.open_world_hint is False
            for name in MEMORY_TOOLS:  # a stateful session has the fabric attached
                assert {f"memory.{name}", f"memory_{name}"} <= set(listed)
            assert listed["afi.read"].annotations.read_only_hint is True  # type: ignore[union-attr]
            assert listed["afi.delete"].annotations.destructive_hint is True  # type: ignore[union-attr]
            assert listed["afi.write"].annotations.read_only_hint is False  # type: ignore[union-attr]

            folder = f"/files/mcp-{tag}"
            calls: list[tuple[str, dict[str, Any]]] = [
                ("afi.manifest", {}),
                ("afi.mkdir", {"path": folder}),
                ("afi_write", {"path": f"{folder}/a.txt", "data": f"hello {tag}\n"}),
                (
                    "afi.write",
                    {"path": f"{folder}/b.bin", "data": base64.b64encode(b"\x00\xff").decode(), "encoding": "base64"},
                ),
                ("afi.stat", {"path": f"{folder}/a.txt"}),
                ("afi.list", {"path": folder}),
                ("afi.read", {"path": f"{folder}/a.txt"}),
                ("afi.search", {"query": tag, "path": folder}),
                ("afi.move", {"from": f"{folder}/a.txt", "to": f"{folder}/c.txt"}),
                ("memory.view", {"path": f"mcp-{tag}"}),
                ("memory.insert", {"block": f"scratch-{tag}", "text": "a line"}),
                ("memory.recall", {"query": "hello"}),
                ("memory.forget", {"block": f"scratch-{tag}"}),
                ("afi.delete", {"path": folder, "recursive": True}),
            ]
            results = {}
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                assert not result.is_error, (name, result.content)
                assert isinstance(result.structured_content, dict), name
                results[name] = result
            assert results["afi.read"].content[0].text == f"hello {tag}\n"  # type: ignore[union-attr]
            assert results["afi.read"].structured_content["encoding"] == "utf-8"  # type: ignore[index]
            assert [m["path"] for m in results["afi.search"].structured_content["matches"]] == [f"{folder}/a.txt"]  # type: ignore[index]
            assert {e["name"] for e in results["memory.view"].structured_content["entries"]} == {"b.bin", "c.txt"}  # type: ignore[index]
            assert results["afi.manifest"].structured_content["profile"] == 3  # type: ignore[index]
            gone = await client.call_tool("afi.stat", {"path": folder})
            assert error_of(gone)["code"] == "not_found"

    run(body)


def test_read_answers_binary_as_base64_with_its_content_type(afi_server: AfiServer) -> None:
    path = f"/files/mcp-bin-{secrets.token_hex(3)}.bin"
    payload = bytes(range(256))
    with McpClient.http(mcp_url(afi_server), afi_server.tokens["writer"]) as client:
        client.write(path, payload)
        out = client.call("read", {"path": path})
        assert out["encoding"] == "base64" and out["content_type"] == "application/octet-stream"
        assert base64.b64decode(out["data"]) == payload
        assert client.read(path, offset=250).data == payload[250:]
        client.delete(path)


def test_errors_are_tool_errors_carrying_the_afi_error(afi_server: AfiServer) -> None:
    async def body() -> None:
        async with sdk(mcp_url(afi_server), afi_server.tokens["writer"]) as client:
            missing = error_of(await client.call_tool("afi.read", {"path": "/facts/never-there.md"}))
            assert missing == {"code": "not_found", "message": missing["message"], "path": "/facts/never-there.md"}
            assert error_of(await client.call_tool("afi.stat", {"path": "/../x"}))["code"] == "invalid_path"
            bad = error_of(await client.call_tool("afi.list", {"path": "/", "limit": "many"}))
            assert bad["code"] == "invalid_path" and "limit" in bad["message"]
            assert error_of(await client.call_tool("afi.search", {"query": {"regex": "("}}))["code"] == "invalid_path"
            assert (
                error_of(await client.call_tool("afi.write", {"path": "/history/x.md", "data": "x"}))["code"]
                == "forbidden"
            )
            assert error_of(await client.call_tool("no.such.tool", {}))["code"] == "not_found"

    run(body)


def test_a_read_key_cannot_call_write_tools(afi_server: AfiServer) -> None:
    path = f"/facts/mcp-readonly-{secrets.token_hex(3)}.md"

    async def body() -> None:
        async with sdk(mcp_url(afi_server), afi_server.tokens["reader"], mode="legacy") as client:
            refused = error_of(await client.call_tool("afi_write", {"path": path, "data": "nope"}))
            assert refused["code"] == "forbidden" and "afi:write" in refused["message"]
            refused = error_of(await client.call_tool("memory.insert", {"block": "x", "text": "nope"}))
            assert refused["code"] == "forbidden" and "afi:write" in refused["message"]
            assert not (await client.call_tool("afi.stat", {"path": "/"})).is_error  # reading is allowed
            assert error_of(await client.call_tool("afi.stat", {"path": path}))["code"] == "not_found"

    run(body)


def test_a_missing_or_bad_key_is_401_naming_the_resource_metadata(afi_server: AfiServer) -> None:
    for headers in ({}, {"Authorization": "Bearer afi_forged"}):
        response = httpx.post(mcp_url(afi_server), json=INIT, headers={**ACCEPT, **headers})
        assert response.status_code == 401
        challenge = response.headers["WWW-Authenticate"]
        metadata = afi_server.url + "/.well-known/oauth-protected-resource/mcp"
        assert f'resource_metadata="{metadata}"' in challenge and 'scope="afi:read afi:write"' in challenge
        assert ('error="invalid_token"' in challenge) == bool(headers)
        assert response.json()["error"]["data"]["code"] == "unauthorized"
    described = httpx.get(afi_server.url + "/.well-known/oauth-protected-resource/mcp").json()
    assert described["resource"] == mcp_url(afi_server) and "afi:write" in described["scopes_supported"]
    with McpClient.http(mcp_url(afi_server)) as anonymous, pytest.raises(Exception) as caught:
        anonymous.stat("/")
    assert getattr(caught.value, "code", None) == "unauthorized"


def test_a_key_of_another_space_is_refused_at_a_space_url(afi_server: AfiServer) -> None:
    response = httpx.post(
        afi_server.url + "/spaces/default/mcp",
        json=INIT,
        headers={**ACCEPT, "Authorization": f"Bearer {afi_server.tokens['other']}"},
    )
    assert response.status_code == 401 and 'error="invalid_token"' in response.headers["WWW-Authenticate"]
    with McpClient.http(afi_server.url + "/spaces/default/mcp", afi_server.tokens["writer"]) as client:
        assert client.stat("/").type == "directory"


@pytest.mark.parametrize("origin, allowed", [("http://evil.example", False), ("http://localhost:3000", True)])
def test_the_origin_is_validated(afi_server: AfiServer, origin: str, allowed: bool) -> None:
    headers = {**ACCEPT, "Origin": origin, "Authorization": f"Bearer {afi_server.tokens['writer']}"}
    response = httpx.post(mcp_url(afi_server), json=INIT, headers=headers)
    if allowed:
        assert response.status_code == 200
    else:
        assert response.status_code == 403 and response.json()["error"]["data"]["code"] == "forbidden"


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
def test_both_mcp_paths_answer(afi_server: AfiServer, path: str) -> None:
    headers = {**ACCEPT, "Authorization": f"Bearer {afi_server.tokens['writer']}"}
    response = httpx.post(afi_server.url + path, json=INIT, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["serverInfo"]["name"] == "afi-memory"
    assert response.headers.get("mcp-session-id")


@pytest.mark.parametrize("how", [{"header": True}, {"query": True}])
def test_a_stateless_request_needs_no_session(afi_server: AfiServer, how: dict[str, bool]) -> None:
    headers = {**ACCEPT, "Authorization": f"Bearer {afi_server.tokens['writer']}", "MCP-Protocol-Version": "2025-06-18"}
    url = mcp_url(afi_server)
    if how.get("header"):
        headers["X-Mcp-Stateless"] = "true"
    else:
        url += "?stateless=1"
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    response = httpx.post(url, json=listing, headers=headers)
    assert response.status_code == 200, response.text
    names = {tool["name"] for tool in response.json()["result"]["tools"]}
    assert {"afi.read", "memory.insert", "memory_recall"} <= names  # no session: the tools name theirs
    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "afi.stat", "arguments": {"path": "/"}},
    }
    answer = httpx.post(url, json=call, headers=headers).json()["result"]
    assert answer["structuredContent"]["type"] == "directory"
    without = httpx.post(
        mcp_url(afi_server), json=listing, headers={k: v for k, v in headers.items() if k != "X-Mcp-Stateless"}
    )
    assert without.status_code >= 400  # a stateful endpoint wants initialize first


def test_a_session_belongs_to_the_key_that_opened_it(afi_server: AfiServer) -> None:
    writer = {**ACCEPT, "Authorization": f"Bearer {afi_server.tokens['writer']}"}
    opened = httpx.post(mcp_url(afi_server), json=INIT, headers=writer)
    session = opened.headers["mcp-session-id"]
    stolen = {**ACCEPT, "Authorization": f"Bearer {afi_server.tokens['admin']}", "mcp-session-id": session}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    response = httpx.post(mcp_url(afi_server), json=listing, headers=stolen)
    assert response.status_code == 404 and response.json()["error"]["data"]["code"] == "not_found"


def test_each_stateful_session_has_its_own_attached_fabric(afi_server: AfiServer) -> None:
    block = f"mcp-{secrets.token_hex(3)}"

    async def body() -> None:
        url, token = mcp_url(afi_server), afi_server.tokens["writer"]
        async with sdk(url, token, mode="legacy") as first, sdk(url, token, mode="legacy") as second:
            assert not (await first.call_tool("memory.insert", {"block": block, "text": "one"})).is_error
            assert not (await second.call_tool("memory.insert", {"block": block, "text": "two"})).is_error
            again = await first.call_tool("memory.insert", {"block": block, "text": "three"})
            assert not again.is_error  # attaching the second session did not detach the first
            assert again.structured_content["created"] is False  # type: ignore[index]
        async with sdk(url, token) as modern:  # the 2026 era keeps no session: the tools name theirs
            names = {tool.name for tool in (await modern.list_tools()).tools}
            assert "afi.read" in names and "memory.insert" in names
            added = await modern.call_tool("memory.insert", {"block": block, "text": "four"})
            assert added.structured_content["created"] is False  # type: ignore[index]
            text = (await modern.call_tool("afi.read", {"path": f"/working/{block}.md"})).content[0].text  # type: ignore[union-attr]
            assert "one" in text and "two" in text and "three" in text and "four" in text
            await modern.call_tool("afi.delete", {"path": f"/working/{block}.md"})

    run(body)


def test_discovery_mode_offers_three_meta_tools_that_run_the_others(afi_server: AfiServer) -> None:
    path = f"/facts/mcp-discovery-{secrets.token_hex(3)}.md"

    async def body() -> None:
        url = mcp_url(afi_server) + "?mode=discovery"
        async with sdk(url, afi_server.tokens["writer"], mode="legacy") as client:
            names = sorted(tool.name for tool in (await client.list_tools()).tools)
            assert names == ["call_tool", "get_tool_schema", "search_tools"]
            found = (await client.call_tool("search_tools", {"query": "read bytes"})).structured_content
            assert found["tools"][0]["name"] == "afi.read"  # type: ignore[index]
            schema = (await client.call_tool("get_tool_schema", {"name": "afi_move"})).structured_content
            assert schema["inputSchema"]["required"] == ["from", "to"]  # type: ignore[index]
            written = await client.call_tool(
                "call_tool", {"name": "afi.write", "arguments": {"path": path, "data": "x"}}
            )
            assert not written.is_error and written.structured_content["path"] == path  # type: ignore[index]
            direct = error_of(await client.call_tool("afi.read", {"path": path}))
            assert direct["code"] == "not_found"  # only the meta-tools are callable by name
            inner = error_of(await client.call_tool("call_tool", {"name": "afi.read", "arguments": {}}))
            assert inner["code"] == "invalid_path" and "path" in inner["message"]
            await client.call_tool("call_tool", {"name": "afi.delete", "arguments": {"path": path}})
        async with sdk(url, afi_server.tokens["reader"], mode="legacy") as reader:
            refused = error_of(
                await reader.call_tool("call_tool", {"name": "afi.write", "arguments": {"path": path, "data": "x"}})
            )
            assert refused["code"] == "forbidden"

    run(body)


def test_the_manifest_and_files_are_resources(afi_server: AfiServer) -> None:
    path = f"/files/mcp-res-{secrets.token_hex(3)}.txt"

    async def body() -> None:
        async with sdk(mcp_url(afi_server), afi_server.tokens["writer"]) as client:
            listed = [r.uri for r in (await client.list_resources()).resources]
            # the manifest first, then the notes (the shared server holds what earlier tests wrote)
            assert listed[0] == "afi://manifest.json"
            areas = ("afi://facts/", "afi://procedures/", "afi://episodes/", "afi://working/")
            assert all(uri.startswith(areas) for uri in listed[1:]), listed
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
            assert templates == ["afi://{+path}"]
            manifest = (await client.read_resource("afi://manifest.json")).contents[0]
            assert json.loads(manifest.text)["provider"] == "afi-memory"  # type: ignore[union-attr]
            await client.call_tool("afi.write", {"path": path, "data": "resource body"})
            contents = (await client.read_resource("afi://" + path.lstrip("/"))).contents[0]
            assert contents.text == "resource body" and contents.mime_type == "text/plain"  # type: ignore[union-attr]
            with pytest.raises(MCPError) as caught:
                await client.read_resource("afi://files/never-there.txt")
            assert caught.value.code == -32002 and caught.value.data["code"] == "not_found"
            await client.call_tool("afi.delete", {"path": path})

    run(body)


def test_the_keyless_owner_uses_mcp_on_loopback(open_server: AfiServer) -> None:
    with McpClient.http(open_server.url + "/mcp", style="underscore") as client:
        assert client.manifest().provider == "afi-memory"
        assert client.stat("/facts").type == "directory"


def test_conversation_search_is_an_mcp_search_mode(afi_server: AfiServer) -> None:
    session = f"mcp-conv-{secrets.token_hex(3)}"
    token = afi_server.tokens["writer"]
    messages = [
        {"role": "user", "text": "We roll out with a canary first", "entry_id": "m1"},
        {"role": "assistant", "text": "Noted, the dashboard shows health", "entry_id": "m2"},
    ]
    response = httpx.post(
        f"{afi_server.url}/ledger/{session}/append",
        json={"messages": messages},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text

    async def body() -> None:
        async with sdk(mcp_url(afi_server), token) as client:
            query = {"conversation": "canary roll out", "session": session}
            result = await client.call_tool("afi.search", {"query": query})
            assert not result.is_error, result.content
            matches = result.structured_content["matches"]  # type: ignore[index]
            assert [m["x-id"] for m in matches][:1] == ["m1"]
            assert matches[0]["path"] == f"/sessions/{session}.md"
            missing = error_of(await client.call_tool("afi.search", {"query": {"conversation": "x"}}))
            assert missing["code"] == "invalid_path"

    run(body)
