"""``afi mcp`` over stdio: the conformance kit, the SDK client, protocol-only stdout, and the MCP Inspector."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from afi.clients import LocalClient
from afi.clients.mcp import McpClient
from afi.conformance import run_kit
from afi.provider import Caller
from tests.support.mcp import afi_mcp_command, error_of, run, sdk

NPM_CACHE = Path(os.environ.get("AFI_NPM_CACHE", Path.home() / ".cache" / "afi-npm"))
INSPECTOR = "@modelcontextprotocol/inspector@0.15.0"


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "afi.db", tmp_path / "files"


def _keys(db: Path) -> dict[str, str]:
    from afi.auth.keys import KeyStore

    keys = KeyStore(db)
    try:
        return {
            "writer": keys.create(space="default", scopes=("afi:write",), name="w")[1],
            "reader": keys.create(space="default", scopes=("afi:read",), name="r")[1],
            "other": keys.create(space="other", scopes=("afi:write",), name="o")[1],
        }
    finally:
        keys.close()


def test_the_conformance_kit_passes_over_stdio(store: tuple[Path, Path]) -> None:
    db, root = store
    tokens = _keys(db)
    command = afi_mcp_command(db, root)
    main = McpClient.stdio(command, env={"AFI_TOKEN": tokens["writer"]})
    other = McpClient.stdio(command, env={"AFI_TOKEN": tokens["other"]})
    try:
        report = run_kit(main, other=other)
    finally:
        main.close()
        other.close()
    assert report.failures() == []
    passed = {o.id for o in report.outcomes if o.result == "pass"}
    from afi.providers.memory.provider import MemoryProvider

    local = run_kit(LocalClient(MemoryProvider(db, root), Caller("w", "default")))
    in_process = {o.id for o in local.outcomes if o.result == "pass"}
    assert in_process <= passed, sorted(in_process - passed)
    assert {"cloak.stat", "cloak.search", "setup", "cleanup"} <= passed


def test_a_bad_token_stops_afi_mcp_with_a_clear_error(store: tuple[Path, Path]) -> None:
    db, root = store
    _keys(db)
    env = {**os.environ, "AFI_TOKEN": "afi_forged"}
    done = subprocess.run(afi_mcp_command(db, root), env=env, input="", capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "unauthorized" in done.stderr and done.stdout == ""


def test_a_read_token_over_stdio_cannot_write(store: tuple[Path, Path]) -> None:
    db, root = store
    tokens = _keys(db)
    with McpClient.stdio(afi_mcp_command(db, root), env={"AFI_TOKEN": tokens["reader"]}) as client:
        with pytest.raises(Exception) as caught:
            client.write("/facts/x.md", b"nope")
        assert getattr(caught.value, "code", None) == "forbidden"
        assert client.stat("/").type == "directory"


def test_stdout_carries_nothing_but_protocol(store: tuple[Path, Path]) -> None:
    db, root = store
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    stat = {"name": "afi.stat", "arguments": {"path": "/x"}}
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": stat},
    ]
    feed = "".join(json.dumps(m) + "\n" for m in messages)
    command = afi_mcp_command(db, root)
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with subprocess.Popen(command, text=True, **pipes) as proc:  # type: ignore[call-overload]
        proc.stdin.write(feed)
        proc.stdin.flush()
        lines = [proc.stdout.readline() for _ in range(3)]
        proc.stdin.close()
        rest = proc.stdout.read()
        proc.wait(30)
    # requests are served concurrently, so replies may come in any order (JSON-RPC matches them by id)
    replies = sorted((json.loads(line) for line in lines), key=lambda r: int(r["id"]))
    assert [r["id"] for r in replies] == [1, 2, 3] and all(r["jsonrpc"] == "2.0" for r in replies)
    assert json.loads(replies[2]["result"]["content"][0]["text"])["code"] == "not_found"
    assert rest == ""


def test_tool_names_and_discovery_are_settings(store: tuple[Path, Path]) -> None:
    db, root = store

    async def body() -> None:
        async with sdk(afi_mcp_command(db, root, "--tool-names", "underscore")) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "afi_read" in names and "memory_recall" in names and not any("." in n for n in names)
            assert error_of(await client.call_tool("afi.read", {"path": "/"}))["code"] == "unsupported"
        async with sdk(afi_mcp_command(db, root, "--tool-names", "dotted")) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "afi.read" in names and not any("_" in n.split(".")[0] for n in names)
        async with sdk(afi_mcp_command(db, root, "--discovery")) as client:
            names = sorted(tool.name for tool in (await client.list_tools()).tools)
            assert names == ["call_tool", "get_tool_schema", "search_tools"]
            found = (await client.call_tool("search_tools", {"query": "recall"})).structured_content
            assert "memory.recall" in [t["name"] for t in found["tools"]]  # type: ignore[index]

    run(body)


def test_stdio_is_one_session_with_the_fabric_attached(store: tuple[Path, Path]) -> None:
    db, root = store

    async def body() -> None:
        async with sdk(afi_mcp_command(db, root)) as client:
            inserted = await client.call_tool("memory.insert", {"path": "notes/todo.md", "text": "buy coffee"})
            assert not inserted.is_error, inserted.content
            read = await client.call_tool("memory.read", {"path": "notes/todo.md"})
            assert read.structured_content["text"] == "buy coffee"  # type: ignore[index]
            escape = error_of(await client.call_tool("memory.read", {"path": "../../etc/passwd"}))
            assert escape["code"] == "invalid_path"
            over_afi = await client.call_tool("afi.read", {"path": "/files/notes/todo.md"})
            assert over_afi.content[0].text == "buy coffee"  # type: ignore[union-attr]

    run(body)


@pytest.mark.skipif(shutil.which("npx") is None, reason="Node.js (npx) is not installed: the MCP Inspector cannot run")
def test_the_mcp_inspector_lists_the_tools_and_reads(store: tuple[Path, Path]) -> None:
    db, root = store
    LocalClient(_provider(db, root), Caller("local")).write("/facts/inspected.md", b"The inspector was here.")
    env = {**os.environ, "npm_config_cache": str(NPM_CACHE), "npm_config_update_notifier": "false"}
    base = ["npx", "-y", INSPECTOR, "--cli", sys.executable, "-c", "from afi.cli import main; main()"]
    base += ["mcp", "--db", str(db), "--root", str(root)]
    listed = subprocess.run([*base, "--method", "tools/list"], env=env, capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr[-2000:]
    names = {tool["name"] for tool in json.loads(listed.stdout)["tools"]}
    assert {"afi.read", "afi_read", "afi.search", "memory.recall"} <= names
    call = [*base, "--method", "tools/call", "--tool-name", "afi.read", "--tool-arg", "path=/facts/inspected.md"]
    read = subprocess.run(call, env=env, capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr[-2000:]
    answer = json.loads(read.stdout)
    assert answer["isError"] is False and "The inspector was here." in answer["content"][0]["text"]
    assert answer["structuredContent"]["content_type"] == "text/markdown"


def _provider(db: Path, root: Path) -> object:
    from afi.providers.memory.provider import MemoryProvider

    return MemoryProvider(db, root)
