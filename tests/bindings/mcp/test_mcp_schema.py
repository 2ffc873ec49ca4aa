"""Flat output schemas (:mod:`afi.bindings.mcp.schema`): the same verdicts as pydantic's, without ``$ref``."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel

from afi.bindings.mcp.schema import flat_schema, model_output_schema
from afi.model import DeleteResult, Entry, Match, MatchContext, MatchPage, Page, dump

ENTRY = Entry(
    path="/files/a.txt",
    type="file",
    size=3,
    mtime="2026-01-01T00:00:00Z",
    ctime="2026-01-01T00:00:00Z",
    content_type="text/plain",
    etag='"x"',
    attributes={"kind": "file"},
)
MATCH = Match(path="/files/a.txt", line=2, column=4, text="a needle", context=MatchContext(before=["x"], after=[]))


def _variants(valid: dict[str, Any]) -> list[dict[str, Any]]:
    """Given a valid instance, return it and broken copies: a wrong type, an extra key, a missing key, a null."""
    out = [valid]
    for key in valid:
        bads: tuple[Any, ...] = (12345, "text", None, [], {"x": 1})
        for bad in bads:
            broken = copy.deepcopy(valid)
            broken[key] = bad
            out.append(broken)
        missing = copy.deepcopy(valid)
        del missing[key]
        out.append(missing)
    out.append({**valid, "unexpected": 1})
    return out


def _nested_variants(page: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return [{**page, key: [item]} for item in _variants(page[key][0])]


CASES = [
    pytest.param(Entry, _variants(dump(ENTRY)), id="entry"),
    pytest.param(Page, _nested_variants(dump(Page(entries=[ENTRY], next_cursor="c")), "entries"), id="page"),
    pytest.param(MatchPage, _nested_variants(dump(MatchPage(matches=[MATCH])), "matches"), id="match-page"),
    pytest.param(MatchPage, _variants(dump(MatchPage(matches=[MATCH], next_cursor="n"))), id="match-page-top"),
    pytest.param(DeleteResult, _variants(dump(DeleteResult(deleted=2))), id="delete"),
]


@pytest.mark.parametrize(("model", "instances"), CASES)
def test_the_flat_schema_judges_every_instance_as_the_original_does(
    model: type[BaseModel], instances: list[dict[str, Any]]
) -> None:
    original = Draft202012Validator(model.model_json_schema(by_alias=True, mode="serialization"))
    flat = model_output_schema(model)
    assert "$ref" not in str(flat) and "$defs" not in flat
    Draft202012Validator.check_schema(flat)
    checker = Draft202012Validator(flat)
    verdicts = [(original.is_valid(i), checker.is_valid(i)) for i in instances]
    assert all(a == b for a, b in verdicts), [i for i, (a, b) in zip(instances, verdicts, strict=True) if a != b]
    assert any(a for a, _ in verdicts) and not all(a for a, _ in verdicts)  # both kinds were tried


def test_references_are_inlined_and_titles_dropped_but_a_property_named_title_kept() -> None:
    schema = {
        "$defs": {"Inner": {"title": "Inner", "type": "object", "properties": {"title": {"type": "string"}}}},
        "title": "Outer",
        "type": "object",
        "properties": {
            "inner": {"$ref": "#/$defs/Inner", "description": "kept beside the reference"},
            "maybe": {"anyOf": [{"$ref": "#/$defs/Inner"}, {"type": "null"}], "default": None},
            "count": {"anyOf": [{"type": "integer"}, {"type": "null"}], "title": "Count"},
            "anything": True,
        },
        "required": ["title", "inner"],
    }
    inner = {"type": "object", "properties": {"title": {"type": "string"}}}
    assert flat_schema(schema) == {
        "type": "object",
        "properties": {
            "inner": {**inner, "description": "kept beside the reference"},
            "maybe": {"anyOf": [inner, {"type": "null"}], "default": None},
            "count": {"type": ["integer", "null"]},
            "anything": True,
        },
        "required": ["title", "inner"],
    }


def test_a_recursive_schema_is_kept_as_it_is() -> None:
    schema = {
        "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}},
        "$ref": "#/$defs/Node",
    }
    assert flat_schema(schema) is schema
