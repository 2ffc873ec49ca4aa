"""How the MCP binding shows tools and their results: offered names, tool definitions, success and
error results."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from afi.errors import AfiError

from .sessions import ToolNames
from .tools import ToolOutput, ToolSpec

__all__ = ["error_result", "exposed_names", "mcp_tool", "success_result"]


def exposed_names(name: str, style: ToolNames) -> list[str]:
    """Given a dotted tool name and the naming style, return the names the tool is offered under."""
    under = name.replace(".", "_")
    if style == "dotted" or under == name:
        return [name]
    if style == "underscore":
        return [under]
    return [name, under]


def error_result(err: AfiError) -> types.CallToolResult:
    """Given an AfiError, return the tool error whose text is its JSON ``{code, message, path?}``."""
    # No structured content: some clients check it against the tool's output schema even on errors.
    body = err.to_dict()
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(body, ensure_ascii=False))], is_error=True)


def _annotations(spec: ToolSpec) -> types.ToolAnnotations:
    return types.ToolAnnotations(
        read_only_hint=spec.read_only,
        destructive_hint=spec.destructive,
        idempotent_hint=spec.idempotent,
        open_world_hint=False,
    )


def mcp_tool(spec: ToolSpec, name: str) -> types.Tool:
    """Given a tool spec and the name to offer it under, return the MCP tool definition."""
    return types.Tool(
        name=name,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=_annotations(spec),
    )


def success_result(output: ToolOutput, durable: dict[str, Any] | None) -> types.CallToolResult:
    """Given a tool's output (and the durable-execution record of a keyed write), return its result."""
    result = types.CallToolResult(
        content=[types.TextContent(text=output.text)], structured_content=output.structured, is_error=False
    )
    if durable is not None:
        result.meta = {"durableExecution": durable}
    return result
