"""A fast yes for tool arguments that plainly match a simple input schema, before jsonschema runs.

Most tool calls carry a path and a string or two. jsonschema's full walk of such an object costs
10-20 µs a call; :func:`quick_check` answers the common case in about one. It only ever says
"certainly valid": anything it does not understand, and every argument set it refuses, goes on to
jsonschema, which decides (and words the error).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["QuickCheck", "quick_check"]

QuickCheck = Callable[[Mapping[str, Any]], bool]

_ANNOTATIONS = frozenset({"description", "default", "title", "examples"})
# What each simple JSON Schema type accepts; bool is an int in Python, not a JSON number.
_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


def quick_check(schema: Mapping[str, Any]) -> QuickCheck | None:
    """Given an object schema, return a predicate that is True only for arguments it surely accepts.

    Returns None when the schema is not a closed object (``additionalProperties: false``) with
    ``properties`` and ``required``: such schemas are left to jsonschema alone.
    """
    if set(schema) - _ANNOTATIONS - {"type", "properties", "required", "additionalProperties"}:
        return None
    if schema.get("type") != "object" or schema.get("additionalProperties") is not False:
        return None
    properties = schema.get("properties")
    required = schema.get("required", [])
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return None
    checks = {name: _value_check(sub) for name, sub in properties.items()}
    needed = frozenset(required)

    def check(arguments: Mapping[str, Any]) -> bool:
        if not needed.issubset(arguments):
            return False
        for name, value in arguments.items():
            ok = checks.get(name)
            if ok is None or not ok(value):
                return False
        return True

    return check


def _value_check(sub: Any) -> Callable[[Any], bool]:
    """Given a property's schema, return a predicate true only for values it surely accepts."""
    if not isinstance(sub, Mapping):
        return _never
    keys = set(sub) - _ANNOTATIONS
    kind = sub.get("type")
    if keys == {"type"} and isinstance(kind, str) and kind in _TYPES:
        return _TYPES[kind]
    if keys == {"anyOf"} and isinstance(sub["anyOf"], list):
        # One plain-typed branch is enough to accept a value of that type; other shapes go to jsonschema.
        plain = [branch["type"] for branch in sub["anyOf"] if _plain(branch)]
        tests = [_TYPES[kind] for kind in plain]
        return lambda value: any(test(value) for test in tests)
    return _never


def _plain(branch: Any) -> bool:
    return (
        isinstance(branch, Mapping)
        and not (set(branch) - _ANNOTATIONS - {"type"})
        and isinstance(branch.get("type"), str)
        and branch["type"] in _TYPES
    )


def _never(value: Any) -> bool:
    return False
