"""Discovery mode (docs/afi.md, "Discovery mode"): three meta-tools that find, describe and run the real tools.

A client that must keep its tool list short opens the session at ``/mcp?mode=discovery`` and sees
only ``search_tools``, ``get_tool_schema`` and ``call_tool``. The first two read the session's own
catalogue; ``call_tool`` is run by the binding itself (it delegates to the named tool, whose
scope, schema and idempotency rules all still apply).
"""

from __future__ import annotations

import json
from typing import Any

from afi.errors import Internal, NotFound
from afi.provider import Caller

from .tools import ToolOutput, ToolSpec

__all__ = ["CALL_TOOL", "discovery_tools"]

CALL_TOOL = "call_tool"
SEARCH_LIMIT = 20


def _object(properties: dict[str, Any], required: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


_FOUND = _object(
    {
        "tools": {
            "type": "array",
            "items": _object(
                {
                    "name": {"type": "string"},
                    "description": {"type": "string"},
                    "read_only": {"type": "boolean"},
                    "aliases": {"type": "array", "items": {"type": "string"}},
                },
                ("name", "description", "read_only", "aliases"),
            ),
        },
        "total": {"type": "integer"},
    },
    ("tools", "total"),
)
_SCHEMA = _object(
    {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"},
        "annotations": {"type": "object"},
    },
    ("name", "description", "inputSchema", "annotations"),
)


def _primary(catalogue: dict[str, ToolSpec]) -> dict[str, tuple[ToolSpec, list[str]]]:
    """Group the catalogue's names by tool: the first name a tool is offered under, then its aliases."""
    grouped: dict[str, tuple[ToolSpec, list[str]]] = {}
    for name, spec in catalogue.items():
        if spec.name in grouped:
            grouped[spec.name][1].append(name)
        else:
            grouped[spec.name] = (spec, [name])
    return grouped


def _score(query: str, spec: ToolSpec, names: list[str]) -> float:
    terms = [t for t in query.lower().replace(".", " ").replace("_", " ").split() if t]
    if not terms:
        return 1.0
    haystack = " ".join([*names, spec.description]).lower()
    return sum(term in haystack for term in terms) / len(terms)


def discovery_tools(catalogue: dict[str, ToolSpec]) -> list[ToolSpec]:
    """Given a session's catalogue (name → tool), return the three meta-tools over it."""

    def search(caller: Caller, args: dict[str, Any]) -> ToolOutput:
        limit = int(args.get("limit", SEARCH_LIMIT))
        ranked = []
        for spec, names in _primary(catalogue).values():
            score = _score(str(args.get("query", "")), spec, names)
            if score > 0:
                ranked.append((-score, names[0], spec, names))
        ranked.sort(key=lambda row: (row[0], row[1]))
        found = [
            {"name": names[0], "description": spec.description, "read_only": spec.read_only, "aliases": names[1:]}
            for _, _, spec, names in ranked[:limit]
        ]
        data = {"tools": found, "total": len(ranked)}
        return ToolOutput(data, json.dumps(data, ensure_ascii=False))

    def schema(caller: Caller, args: dict[str, Any]) -> ToolOutput:
        spec = catalogue.get(args["name"])
        if spec is None:
            raise NotFound(f"no tool named {args['name']!r}; search_tools lists them")
        data: dict[str, Any] = {
            "name": args["name"],
            "description": spec.description,
            "inputSchema": spec.input_schema,
            "annotations": {
                "readOnlyHint": spec.read_only,
                "destructiveHint": spec.destructive,
                "idempotentHint": spec.idempotent,
                "openWorldHint": False,
            },
        }
        if spec.output_schema is not None:
            data["outputSchema"] = spec.output_schema
        return ToolOutput(data, json.dumps(data, ensure_ascii=False))

    def delegated(caller: Caller, args: dict[str, Any]) -> ToolOutput:
        raise Internal("call_tool is run by the binding, which delegates to the named tool")

    return [
        ToolSpec(
            "search_tools",
            "Find tools by what they do (words matched against names and descriptions); "
            "then get_tool_schema and call_tool.",
            _object(
                {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "default": SEARCH_LIMIT}},
                ("query",),
            ),
            _FOUND,
            True,
            False,
            True,
            search,
        ),
        ToolSpec(
            "get_tool_schema",
            "The input schema, output schema and annotations of one tool, by name.",
            _object({"name": {"type": "string"}}, ("name",)),
            _SCHEMA,
            True,
            False,
            True,
            schema,
        ),
        ToolSpec(
            CALL_TOOL,
            "Run one tool by name with its arguments; the result is that tool's own result.",
            _object({"name": {"type": "string"}, "arguments": {"type": "object"}}, ("name",)),
            None,
            False,
            True,
            False,
            delegated,
        ),
    ]
