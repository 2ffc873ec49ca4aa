"""File notes follow their files: a move rewrites the path only, a delete tombstones, scopes never mix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from afi.providers.memory import MemoryScopeError, MemoryValidationError, create_memory, create_memory_fabric
from afi.providers.memory.fabric.repoint import (
    create_deletion_propagator,
    create_fabric_repoint_handler,
    repoint_source,
)
from afi.storage.trigram import trigram_query


def make(db: Path, thread: str = "thread-1") -> tuple[Any, Any]:
    memory = create_memory(str(db), tenant_id="acme", resource_id="user-1", thread_id=thread)
    return memory, create_memory_fabric(memory)


def raw_rows(memory: Any) -> dict[str, tuple[Any, ...]]:
    """Every stored column of the scope's notes, keyed by id (embedding bytes included)."""
    rows = memory.store.conn().execute(
        "SELECT id, kind, path, name, content, embedding, status, seq, rendered, valid_to FROM notes "
        "WHERE tenant_id = ? AND resource_id = ? AND thread_id = ?",
        (memory.scope.tenant_id, memory.scope.resource_id, memory.scope.thread_id),
    )
    return {row[0]: tuple(row) for row in rows}


def trigram_paths(memory: Any, needle: str) -> list[str]:
    return [
        row[0]
        for row in memory.store.conn().execute(
            "SELECT notes.id FROM notes_trigram JOIN notes ON notes.rowid = notes_trigram.rowid "
            "WHERE notes_trigram MATCH ?",
            (trigram_query([needle]),),
        )
    ]


@pytest.fixture
def world(tmp_path: Path) -> tuple[Any, Any, dict[str, Any]]:
    memory, fabric = make(tmp_path / "memory.db")
    notes = {
        "a": fabric.remember(kind="file", path="docs/a.md", content="Rollout health lives on the deploy dashboard"),
        "c": fabric.remember(kind="file", path="docs/c.md", content="Invoices are paid on the first of the month"),
        "fact": fabric.remember(kind="fact", content="docs/a.md is the deploy runbook", tags=["docs/a.md"]),
    }
    return memory, fabric, notes


def test_move_rewrites_only_the_path_and_keeps_the_embedding_bytes(world: tuple[Any, Any, dict[str, Any]]) -> None:
    memory, fabric, notes = world
    before = raw_rows(memory)
    handler = create_fabric_repoint_handler(memory)
    assert repoint_source(memory, "docs/a.md", "docs/b.md", handlers=[handler]) == 1
    after = raw_rows(memory)
    moved_id = notes["a"].id
    old, new = before[moved_id], after[moved_id]
    assert new[2] == "docs/b.md"
    assert new[4] == old[4]  # content
    assert new[5] == old[5] and new[5] is not None  # embedding bytes, verbatim: nothing re-embedded
    assert new[6] == "active" and new[9] == old[9]
    assert new[7] > old[7]  # the change is visible to other processes through seq
    for other in (notes["c"].id, notes["fact"].id):
        assert after[other] == before[other]  # other paths and non-file notes are untouched
    assert fabric.find_file("docs/a.md") is None
    found = fabric.find_file("docs/b.md")
    assert found is not None and found.id == moved_id and found.content == notes["a"].content
    assert found.created_at == notes["a"].created_at and found.token_count == notes["a"].token_count


def test_move_recomputes_the_rendering_so_grep_sees_the_new_path(world: tuple[Any, Any, dict[str, Any]]) -> None:
    memory, _, notes = world
    repoint_source(memory, "docs/a.md", "docs/b.md", handlers=[create_fabric_repoint_handler(memory)])
    assert "path: docs/b.md" in raw_rows(memory)[notes["a"].id][8]
    assert trigram_paths(memory, "path: docs/b.md") == [notes["a"].id]
    assert trigram_paths(memory, "path: docs/a.md") == []


def test_moved_note_is_still_recalled(world: tuple[Any, Any, dict[str, Any]]) -> None:
    memory, fabric, notes = world
    repoint_source(memory, "docs/a.md", "docs/b.md", handlers=[create_fabric_repoint_handler(memory)])
    hits = fabric.recall("deploy dashboard rollout health", kinds=["file"]).hits
    assert hits[0].id == notes["a"].id and hits[0].path == "docs/b.md"


def test_move_of_an_unknown_path_changes_nothing(world: tuple[Any, Any, dict[str, Any]]) -> None:
    memory, _, _ = world
    before = raw_rows(memory)
    assert repoint_source(memory, "docs/zzz.md", "docs/b.md", handlers=[create_fabric_repoint_handler(memory)]) == 0
    assert repoint_source(memory, "docs/a.md", "docs/a.md", handlers=[create_fabric_repoint_handler(memory)]) == 0
    assert raw_rows(memory) == before


def test_delete_tombstones_and_recall_stops_serving(world: tuple[Any, Any, dict[str, Any]]) -> None:
    memory, fabric, notes = world
    assert [h.id for h in fabric.recall("deploy dashboard rollout", kinds=["file"]).hits][:1] == [notes["a"].id]
    before = raw_rows(memory)
    propagator = create_deletion_propagator(memory, handlers=[create_fabric_repoint_handler(memory)])
    assert propagator.propagate("docs/a.md") == 1
    after = raw_rows(memory)
    assert after[notes["a"].id][6] == "forgotten"
    assert notes["a"].id not in [h.id for h in fabric.recall("deploy dashboard rollout", kinds=["file"]).hits]
    assert after[notes["c"].id] == before[notes["c"].id] and after[notes["fact"].id] == before[notes["fact"].id]
    assert propagator.propagate("docs/a.md") == 0  # already tombstoned: nothing more to do


@pytest.mark.parametrize(
    ("handler_reason", "propagator_reason", "status"),
    [
        pytest.param("forgotten", "forgotten", "forgotten", id="default"),
        pytest.param("legal_hold", "legal_hold", "legal_hold", id="both-hold"),
        pytest.param("forgotten", "legal_hold", "legal_hold", id="propagator-hold"),
        pytest.param("legal_hold", "forgotten", "legal_hold", id="handler-hold"),
    ],
)
def test_legal_hold_keeps_the_row_but_hides_it(
    world: tuple[Any, Any, dict[str, Any]], handler_reason: Any, propagator_reason: Any, status: str
) -> None:
    memory, fabric, notes = world
    handler = create_fabric_repoint_handler(memory, reason=handler_reason)
    create_deletion_propagator(memory, handlers=[handler], reason=propagator_reason).propagate("docs/a.md")
    row = raw_rows(memory)[notes["a"].id]
    assert row[6] == status and row[4] == notes["a"].content
    assert notes["a"].id not in [h.id for h in fabric.recall("deploy dashboard rollout", kinds=["file"]).hits]


def test_a_handler_for_another_scope_is_refused_and_nothing_is_written(
    world: tuple[Any, Any, dict[str, Any]], tmp_path: Path
) -> None:
    memory, _, _ = world
    other_memory, _ = make(tmp_path / "memory.db", thread="thread-2")
    own, foreign = create_fabric_repoint_handler(memory), create_fabric_repoint_handler(other_memory)
    before = raw_rows(memory)
    with pytest.raises(MemoryScopeError) as info:
        repoint_source(memory, "docs/a.md", "docs/b.md", handlers=[own, foreign])
    assert info.value.code == "forbidden"
    with pytest.raises(MemoryScopeError):
        create_deletion_propagator(memory, handlers=[own, foreign]).propagate("docs/a.md")
    with pytest.raises(MemoryScopeError):
        foreign.repoint("docs/a.md", "docs/b.md", scope=memory.scope)
    assert raw_rows(memory) == before


def test_a_handler_never_sees_another_threads_notes(tmp_path: Path) -> None:
    memory_1, fabric_1 = make(tmp_path / "memory.db", "thread-1")
    _, fabric_2 = make(tmp_path / "memory.db", "thread-2")
    fabric_1.remember(kind="file", path="shared.md", content="thread one's copy of the plan")
    theirs = fabric_2.remember(kind="file", path="shared.md", content="thread two's copy of the plan")
    assert repoint_source(memory_1, "shared.md", "moved.md", handlers=[create_fabric_repoint_handler(memory_1)]) == 1
    untouched = fabric_2.find_file("shared.md")
    assert untouched is not None and untouched.id == theirs.id


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda m, h: repoint_source(m, "", "b.md", handlers=[h]), id="empty-from"),
        pytest.param(lambda m, h: repoint_source(m, "a.md", "  ", handlers=[h]), id="blank-to"),
        pytest.param(lambda m, h: create_deletion_propagator(m, handlers=[h]).propagate(""), id="empty-delete"),
        pytest.param(lambda m, h: create_deletion_propagator(m, handlers=[h], reason="gone"), id="bad-reason"),
        pytest.param(lambda m, h: create_fabric_repoint_handler(m, reason="erased"), id="bad-handler-reason"),
    ],
)
def test_bad_input_is_refused(world: tuple[Any, Any, dict[str, Any]], call: Any) -> None:
    memory, _, _ = world
    before = raw_rows(memory)
    with pytest.raises(MemoryValidationError):
        call(memory, create_fabric_repoint_handler(memory))
    assert raw_rows(memory) == before
