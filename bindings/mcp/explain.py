"""Bad tool arguments said plainly: which argument, what it should be, and what was sent.

:func:`bad_arguments` turns the most relevant JSON Schema violation of a call into the
:class:`~afi.errors.InvalidPath` the client reads (``invalid_path`` is AFI's code for a malformed
request), e.g. ``afi.read: argument 'path' should be a string, not 3``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema

from afi.errors import InvalidPath

__all__ = ["bad_arguments", "explain"]

_TYPES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "a list",
    "null": "null",
}


def _shown(value: Any) -> str:
    text = "null" if value is None else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(schema: Any) -> str:
    """Given a schema, return what a value of it is, in words."""
    if not isinstance(schema, Mapping):
        return "a value"
    if "enum" in schema:
        return "one of " + ", ".join(_shown(v) for v in schema["enum"])
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and properties:
        return "an object {" + ", ".join(properties) + "}"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(_TYPES.get(str(k), str(k)) for k in kind)
    return _TYPES.get(str(kind), "a value")


def _should(error: jsonschema.ValidationError) -> str:
    """Given one violation, return what the value should have been (the clause after 'should')."""
    rule, limit = error.validator, error.validator_value
    simple: dict[str, str] = {
        "minimum": f"be at least {limit}",
        "exclusiveMinimum": f"be more than {limit}",
        "maximum": f"be at most {limit}",
        "exclusiveMaximum": f"be less than {limit}",
        "maxLength": f"be at most {limit} characters long",
        "minItems": f"list at least {limit} item{'s' if limit != 1 else ''}",
        "maxItems": f"list at most {limit} items",
        "pattern": f"match the pattern {limit!r}",
    }
    if rule in simple:
        return simple[str(rule)]
    if rule == "minLength":
        return "not be empty" if limit == 1 else f"be at least {limit} characters long"
    if rule == "type":
        return f"be {_kind({'type': limit})}"
    if rule == "enum":
        return f"be {_kind({'enum': limit})}"
    if rule in ("anyOf", "oneOf"):
        return "be " + "; or ".join(_kind(option) for option in limit)
    return f"satisfy {rule}"


def explain(error: jsonschema.ValidationError) -> str:
    """Given the most relevant violation of a call's arguments, return it in plain words."""
    where = ".".join(str(part) for part in error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, Mapping):
        missing = [name for name in error.validator_value if name not in error.instance]
        names = ", ".join(f"'{name}'" for name in missing)
        within = f" of '{where}'" if where else ""
        one = len(missing) == 1
        return f"{'argument' if one else 'arguments'} {names}{within} {'is' if one else 'are'} required"
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        known = error.schema.get("properties", {}) if isinstance(error.schema, Mapping) else {}
        extra = [name for name in error.instance if name not in known]
        names = ", ".join(f"'{name}'" for name in extra)
        within = f" in '{where}'" if where else ""
        takes = ", ".join(known) or "nothing"
        return f"unknown {'argument' if len(extra) == 1 else 'arguments'} {names}{within} (it takes: {takes})"
    if not where:
        return f"the arguments should {_should(error)}, not {_shown(error.instance)}"
    return f"argument '{where}' should {_should(error)}, not {_shown(error.instance)}"


def bad_arguments(tool: str, validator: jsonschema.protocols.Validator, arguments: Any) -> InvalidPath | None:
    """Given a tool, its arguments' validator and the arguments, return the refusal (None: they are valid)."""
    error = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    return InvalidPath(f"{tool}: {explain(error)}")
