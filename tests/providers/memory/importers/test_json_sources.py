"""Importing the MCP reference memory server's knowledge graph and a mem0 export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from afi.errors import InvalidPath, TooLarge
from afi.providers.memory.importers import import_foreign

from .notes import links, names, note, provider_on

GRAPH = [
    {"type": "entity", "name": "John_Smith", "entityType": "person", "observations": ["Speaks fluent Spanish"]},
    {"type": "entity", "name": "Anthropic", "entityType": "organization", "observations": []},
    {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "works_at"},
    {"type": "entity", "name": "John_Smith", "entityType": "person", "observations": ["Graduated in 2019"]},
    {"type": "relation", "from": "John_Smith", "to": "Anthropic", "relationType": "admires"},
    {"type": "relation", "from": "Anthropic", "to": "Nobody", "relationType": "employs"},
    {"type": "entity", "name": "john smith", "entityType": "person", "observations": ["A different John"]},
]


def _jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def test_an_mcp_memory_graph_becomes_notes_linked_by_their_relations(tmp_path: Path) -> None:
    provider = provider_on(tmp_path)
    report = import_foreign(provider, _jsonl(tmp_path / "memory.jsonl", GRAPH), fmt=None, space="default")
    assert report.format == "mcp-memory" and report.created == 3
    assert names(provider, "/facts") == ["/facts/anthropic.md", "/facts/john-smith.md", "/facts/john_smith.md"]
    front, body = note(provider, "/facts/john_smith.md")
    assert body == "John_Smith (person)\n- Speaks fluent Spanish\n- Graduated in 2019\n"
    assert front["tags"] == ["person"] and front["keywords"] == ["John_Smith"]
    assert links(provider, "/facts/john_smith.md") == {"/facts/anthropic.md": "works_at,admires"}
    assert note(provider, "/facts/anthropic.md")[1] == "Anthropic (organization)\n"
    assert report.unresolved == ["Anthropic -employs-> Nobody (memory.jsonl line 6: no entity 'Nobody')"]
    assert report.summary() == (
        "imported 3 notes (1 link) from an MCP memory knowledge graph; 1 link to nothing imported: "
        "Anthropic -employs-> Nobody (memory.jsonl line 6: no entity 'Nobody')"
    )
    again = import_foreign(provider, tmp_path / "memory.jsonl", fmt="mcp-memory", space="default")
    assert (again.created, again.unchanged) == (0, 3) and len(names(provider, "/facts")) == 3


@pytest.mark.parametrize(
    ("line", "message"),
    [
        pytest.param('{"type": "entity", "name": ', r"memory\.json line 7: not JSON", id="not-json"),
        pytest.param('{"type": "note"}', r"memory\.json line 7: not an entity or relation", id="unknown-type"),
        pytest.param('{"type": "relation", "from": "a", "to": ""}', r"line 7: 'to' must be", id="empty-to"),
        pytest.param('{"type": "entity", "name": "x", "observations": "y"}', r"line 7: observations", id="obs"),
    ],
)
def test_a_broken_line_7_leaves_the_store_without_any_new_note(tmp_path: Path, line: str, message: str) -> None:
    provider = provider_on(tmp_path)
    source = tmp_path / "memory.json"
    good = [json.dumps({"type": "entity", "name": f"e{i}", "entityType": "t", "observations": ["o"]}) for i in range(6)]
    source.write_text("\n".join([*good, line, *good]) + "\n")
    with pytest.raises(InvalidPath, match=message):
        import_foreign(provider, source, fmt="mcp-memory", space="default")
    assert names(provider, "/facts") == [] and provider.audit_log() == []


MEM0 = [
    {
        "id": "3f2a9c1e-0000-4000-8000-000000000001", "memory": "Prefers tea over coffee", "hash": "abc",
        "metadata": {"source": "chat", "confidence": 0.9}, "categories": ["food", "preferences"],
        "created_at": "2024-07-26T10:29:36.630547-07:00", "updated_at": None, "user_id": "alice",
    },
    {"id": "3f2a9c1e-0000-4000-8000-000000000002", "memory": "Lives in Lisbon", "agent_id": "helper"},
]  # fmt: skip


@pytest.mark.parametrize("wrapped", [False, True], ids=["list", "results"])
def test_a_mem0_export_becomes_fact_notes(tmp_path: Path, wrapped: bool) -> None:
    provider = provider_on(tmp_path)
    source = tmp_path / "mem0.json"
    source.write_text(json.dumps({"results": MEM0} if wrapped else MEM0))
    report = import_foreign(provider, source, fmt=None, space="default")
    assert report.format == "mem0" and report.summary() == "imported 2 notes (0 links) from a mem0 export"
    first = "/facts/mem0-3f2a9c1e-0000-4000-8000-000000000001.md"
    assert names(provider, "/facts") == [first, "/facts/mem0-3f2a9c1e-0000-4000-8000-000000000002.md"]
    front, body = note(provider, first)
    assert body == "Prefers tea over coffee\n"
    assert front["tags"] == ["food", "preferences"] and front["keywords"] == ["user_id=alice"]
    assert front["valid_from"] == "2024-07-26T17:29:36.630Z"
    assert json.loads(front["context"]) == {"confidence": 0.9, "source": "chat"}
    # mem0 updates a memory in place: a later export of the same id is a new version of the same note
    source.write_text(json.dumps([{**MEM0[0], "memory": "Prefers green tea"}, MEM0[1]]))
    again = import_foreign(provider, source, fmt="mem0", space="default")
    assert (again.created, again.updated, again.unchanged) == (0, 1, 1)
    newer, text = note(provider, first)
    assert text == "Prefers green tea\n" and newer["supersedes"] == front["id"]


def test_a_bad_mem0_record_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    provider = provider_on(tmp_path)
    source = tmp_path / "mem0.json"
    for records, error, message in [
        ([MEM0[0], {"id": "x"}], InvalidPath, r"^mem0\.json record 2: 'memory' must be a non-empty string"),
        ([MEM0[0], {**MEM0[1], "created_at": "last week"}], InvalidPath, r"record 2: created_at is not an ISO"),
        ([MEM0[0], MEM0[1], {"memory": "y" * 4001}], TooLarge, r"^mem0\.json record 3: content has 4001 char"),
    ]:
        source.write_text(json.dumps(records))
        with pytest.raises(error, match=message):
            import_foreign(provider, source, fmt="mem0", space="default")
    source.write_text("[{")
    with pytest.raises(InvalidPath, match=r"^mem0\.json: not JSON"):
        import_foreign(provider, source, fmt="mem0", space="default")
    assert names(provider, "/facts") == []
