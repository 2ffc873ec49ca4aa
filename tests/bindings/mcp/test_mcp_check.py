"""The quick argument check never accepts what jsonschema refuses, and the binding still refuses bad calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client

from afi.bindings.mcp import McpBinding, stdio_info
from afi.bindings.mcp.check import quick_check
from afi.bindings.mcp.tools import INPUTS
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from tests.support.mcp import error_of, run

OWNER = Caller("local")
# Well- and ill-typed values for every property name the afi.* tools use, plus strangers.
VALUES: list[Any] = ["/files/a.txt", "", 0, 3, -1, 1.5, True, False, None, [], {}, {"regex": "a"}, ["x"]]


def _argument_sets(schema: dict[str, Any]) -> list[dict[str, Any]]:
    names = [*schema.get("properties", {}), "unknown"]
    sets: list[dict[str, Any]] = [{}]
    for name in names:
        sets += [{name: value} for value in VALUES]
    base = {name: "/files/a.txt" for name in schema.get("required", [])}
    sets.append(base)
    for name in names:
        sets += [{**base, name: value} for value in VALUES]
    return sets


@pytest.mark.parametrize("tool", sorted(INPUTS))
def test_quick_check_accepts_only_what_jsonschema_accepts(tool: str) -> None:
    schema = INPUTS[tool]
    check = quick_check(schema)
    assert check is not None, f"{tool}: every afi.* input schema is a closed object"
    validator = jsonschema.Draft202012Validator(schema)
    accepted = 0
    for arguments in _argument_sets(schema):
        if check(arguments):
            accepted += 1
            assert validator.is_valid(arguments), (tool, arguments)
    assert accepted > 0, f"{tool}: the quick path never fires, so it saves nothing"


def test_quick_check_declines_schemas_it_does_not_understand() -> None:
    assert quick_check({"type": "object", "properties": {}}) is None  # open object
    assert quick_check({"type": "array"}) is None
    assert quick_check({"type": "object", "properties": {}, "additionalProperties": False, "minProperties": 1}) is None
    pattern = {
        "type": "object",
        "properties": {"p": {"type": "string", "pattern": "^/"}},
        "required": ["p"],
        "additionalProperties": False,
    }
    check = quick_check(pattern)
    assert check is not None and not check({"p": "/a"})  # a constrained string goes to jsonschema


def test_quick_check_keeps_json_types_apart() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"}},
        "required": [],
        "additionalProperties": False,
    }
    check = quick_check(schema)
    assert check is not None
    assert check({"n": 3, "x": 1.5, "b": True})
    assert not check({"n": True}) and not check({"x": False}) and not check({"b": 1}) and not check({"n": 2.5})


def _binding(tmp_path: Path) -> McpBinding:
    provider = MemoryProvider(tmp_path / "m.db", tmp_path / "root")
    provider.write(OWNER, "/files/a.txt", b"one\ntwo needle\n")
    return McpBinding(provider, default_info=stdio_info(OWNER), inline_reads=True)


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("afi.read", {}, "argument 'path' is required"),
    ("afi.read", {"path": 3}, "argument 'path' should be a string, not 3"),
    ("afi.read", {"path": "/files/a.txt", "bogus": 1}, "unknown argument 'bogus'"),
    ("afi.search", {"query": 5, "path": "/files"}, "argument 'query' should be a string; or"),
    ("afi.search", {"query": {"regex": 1}, "path": "/files"}, "argument 'query.regex' should be a string"),
]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_real_client_gets_answers_and_refusals_as_before(tmp_path: Path, mode: Any) -> None:
    binding = _binding(tmp_path)

    async def body() -> None:
        async with Client(binding.server, mode=mode) as client:
            found = await client.call_tool("afi.search", {"query": "needle", "path": "/files"})
            assert not found.is_error and found.structured_content is not None
            assert [m["line"] for m in found.structured_content["matches"]] == [2]
            read = await client.call_tool("afi_read", {"path": "/files/a.txt"})
            assert not read.is_error and read.structured_content is not None
            assert read.structured_content["data"] == "one\ntwo needle\n"
            for name, arguments, where in BAD:
                error = error_of(await client.call_tool(name, arguments))
                assert error["code"] == "invalid_path", (name, arguments)
                assert error["message"].startswith(f"{name}: {where}"), error

    run(body)
    assert binding._quick["afi.search"] is not None and binding._quick["afi.read"] is not None
