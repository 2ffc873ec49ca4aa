"""Tool output schemas as clients check them cheaply: self-contained, no ``$ref``, no titles.

An MCP client validates every structured result against the tool's output schema. Pydantic's schema
of a model nests the models it uses under ``$defs`` and spells an optional field
``anyOf: [{type: X}, {type: null}]``; each ``$ref`` is a registry lookup on every call, and each such
``anyOf`` two sub-validations. :func:`flat_schema` gives the same constraints with the references
inlined and ``type: [X, "null"]`` instead, which the SDK's client validates in about two thirds of
the time (and which clients that cannot resolve ``$ref`` understand).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["flat_schema", "model_output_schema"]

_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_SCHEMA_VALUES = ("items", "additionalProperties", "not", "contains", "if", "then", "else", "propertyNames")
_DEFS = "#/$defs/"


class _Cycle(Exception):
    """A ``$ref`` that reaches itself: such a schema is kept as it is."""


def model_output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Given a pydantic model, return the flat JSON Schema of what it serializes to."""
    return flat_schema(model.model_json_schema(by_alias=True, mode="serialization"))


def flat_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Given a JSON Schema whose references point into its own ``$defs``, return it self-contained.

    References are inlined, ``title`` annotations dropped, and an ``anyOf`` of bare types merged
    into one ``type`` list. A recursive schema (a ``$ref`` inside its own definition) is returned
    unchanged, since it cannot be inlined.
    """
    defs = schema.get("$defs", {})
    try:
        return _flat(schema, defs, ())
    except _Cycle:
        return schema


def _flat(node: dict[str, Any], defs: dict[str, Any], expanding: tuple[str, ...]) -> dict[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_DEFS) and ref[len(_DEFS) :] in defs:
        name = ref[len(_DEFS) :]
        if name in expanding:
            raise _Cycle(name)
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        return {**_flat(defs[name], defs, (*expanding, name)), **_flat(siblings, defs, expanding)}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "$defs"):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _sub(sub, defs, expanding) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_sub(sub, defs, expanding) for sub in value]
        elif key in _SCHEMA_VALUES and isinstance(value, dict):
            out[key] = _flat(value, defs, expanding)
        else:
            out[key] = value
    branches = out.get("anyOf")
    if isinstance(branches, list) and branches and "type" not in out and all(_bare_type(b) for b in branches):
        del out["anyOf"]
        out["type"] = [b["type"] for b in branches]
    return out


def _sub(node: Any, defs: dict[str, Any], expanding: tuple[str, ...]) -> Any:
    return _flat(node, defs, expanding) if isinstance(node, dict) else node  # a boolean schema stays


def _bare_type(branch: Any) -> bool:
    return isinstance(branch, dict) and set(branch) == {"type"} and isinstance(branch["type"], str)
