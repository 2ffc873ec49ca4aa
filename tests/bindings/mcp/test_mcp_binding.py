"""The MCP binding in process: the official client against the real server object over a real store.

Covers what makes a tool call cheap without changing its answer: reads run on the event loop when
asked (and still turn stray exceptions into ``internal``), the input-schema lookup the SDK uses
instead of a ``tools/list`` per call agrees with ``tools/list``, and output schemas are flat.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import Client

from afi.bindings.mcp import McpBinding, ToolOutput, ToolSpec, stdio_info
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from tests.support.mcp import error_of, run

OWNER = Caller("local")


class ProbeSessions:
    """A fabric-session source whose tools record the thread they ran on (and can fail on purpose)."""

    def __init__(self) -> None:
        self.threads: dict[str, int] = {}

    def _tool(self, name: str, read_only: bool, fail: bool = False) -> ToolSpec:
        def call(caller: Caller, args: dict[str, Any]) -> ToolOutput:
            self.threads[name] = threading.get_ident()
            if fail:
                raise KeyError("a bug, not an AfiError")
            return ToolOutput({"ran": name}, name)

        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": False}
        return ToolSpec(name, name, schema, None, read_only, False, read_only, call)

    def open(self, caller: Caller, session_id: str) -> list[ToolSpec]:
        return [
            self._tool("probe.look", True),
            self._tool("probe.change", False),
            self._tool("probe.broken", True, fail=True),
        ]

    def close(self, session_id: str) -> None:
        return None

    def sessionless(self) -> list[ToolSpec]:
        return []


def _binding(tmp_path: Path, **kw: Any) -> McpBinding:
    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    return McpBinding(provider, default_info=stdio_info(OWNER, "tools", "s1"), **kw)


@pytest.mark.parametrize("inline", [True, False], ids=["inline-reads", "threaded-reads"])
def test_reads_run_on_the_loop_only_when_asked_and_writes_never_do(tmp_path: Path, inline: bool) -> None:
    probes = ProbeSessions()
    binding = _binding(tmp_path, fabric=probes, inline_reads=inline)
    loop_thread: list[int] = []

    async def body() -> None:
        loop_thread.append(threading.get_ident())
        async with Client(binding.server, mode="legacy") as client:
            for name in ("probe.look", "probe.change"):
                result = await client.call_tool(name, {"n": 1})
                assert not result.is_error and result.structured_content == {"ran": name}
            assert error_of(await client.call_tool("probe.broken", {}))["code"] == "internal"
            assert error_of(await client.call_tool("probe.look", {"n": "one"}))["code"] == "invalid_path"

    run(body)
    assert (probes.threads["probe.look"] == loop_thread[0]) is inline
    assert (probes.threads["probe.broken"] == loop_thread[0]) is inline
    assert probes.threads["probe.change"] != loop_thread[0]


def test_an_inline_read_answers_as_the_threaded_one_does(tmp_path: Path) -> None:
    answers: list[list[Any]] = []
    _binding(tmp_path).provider.write(OWNER, "/files/a.txt", b"alpha\nneedle\n")
    for inline in (True, False):
        binding = _binding(tmp_path, inline_reads=inline)

        async def body(binding: McpBinding = binding) -> None:
            async with Client(binding.server, mode="legacy") as client:
                read = await client.call_tool("afi.read", {"path": "/files/a.txt"})
                found = await client.call_tool("afi.search", {"query": "needle", "path": "/files"})
                missing = await client.call_tool("afi.stat", {"path": "/files/none"})
                answers.append([read.structured_content, found.structured_content, error_of(missing)])

        run(body)
    assert answers[0] == answers[1]
    assert answers[0][0]["data"] == "alpha\nneedle\n" and answers[0][2]["code"] == "not_found"


@pytest.mark.parametrize("style", ["dotted", "underscore", "both"])
def test_the_input_schema_lookup_agrees_with_tools_list(tmp_path: Path, style: str) -> None:
    from afi.app.mcp import memory_fabric_sessions

    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    binding = McpBinding(
        provider,
        tool_names=style,
        fabric=memory_fabric_sessions(provider),
        default_info=stdio_info(OWNER, "tools", "s1"),
    )
    listed: dict[str, Any] = {}

    async def body() -> None:
        async with Client(binding.server, mode="legacy") as client:
            listed.update({tool.name: tool.input_schema for tool in (await client.list_tools()).tools})

    run(body)
    assert any(name.startswith("memory") for name in listed) and any(name.startswith("afi") for name in listed)
    for name, schema in listed.items():
        looked = binding.input_schema(name)
        if name.startswith("memory"):  # one lookup for both eras: a session-less call may name its session
            assert looked is not None and looked["properties"]["session"]["type"] == "string", name
            properties = {key: value for key, value in looked["properties"].items() if key != "session"}
            looked = {**looked, "properties": properties}
        assert looked == schema, name
    for meta in ("search_tools", "get_tool_schema", "call_tool"):
        assert binding.input_schema(meta) is not None
    assert binding.input_schema("no.such.tool") is None
    assert binding.server.get_tool_input_schema is not None


def test_a_modern_era_call_is_answered_with_the_lookup_in_place(tmp_path: Path) -> None:
    binding = _binding(tmp_path)
    binding.provider.write(OWNER, "/facts/coffee.md", b"Alice drinks coffee.")

    async def body() -> None:
        async with Client(binding.server) as client:  # auto: the 2026 per-request path
            read = await client.call_tool("afi.read", {"path": "/facts/coffee.md"})
            assert read.structured_content is not None and "Alice drinks coffee." in read.structured_content["data"]
            assert error_of(await client.call_tool("afi.read", {"path": 7}))["code"] == "invalid_path"

    run(body)


def test_structured_results_validate_against_the_flat_output_schemas(tmp_path: Path) -> None:
    binding = _binding(tmp_path)
    binding.provider.write(OWNER, "/files/d/a.txt", b"one needle\n")
    calls: dict[str, dict[str, Any]] = {
        "afi.stat": {"path": "/files/d/a.txt"},
        "afi.list": {"path": "/files/d"},
        "afi.search": {"query": "needle", "x-context": 1},
        "afi.read": {"path": "/files/d/a.txt"},
    }
    specs = {spec.name: spec for spec in binding.afi}
    results: dict[str, Any] = {}

    async def body() -> None:
        async with Client(binding.server, mode="legacy") as client:
            for name, args in calls.items():
                results[name] = (await client.call_tool(name, args)).structured_content

    run(body)
    for name, data in results.items():
        schema = specs[name].output_schema
        assert schema is not None and "$ref" not in str(schema) and "$defs" not in schema
        assert list(Draft202012Validator(schema).iter_errors(data)) == [], name
    assert results["afi.search"]["matches"][0]["context"] == {"before": [], "after": []}
