from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from afi.providers.memory import (
    MemoryFabric,
    MemoryLimitError,
    MemoryNotFoundError,
    MemoryValidationError,
    create_memory,
    create_memory_fabric,
    space_memory,
)


@pytest.fixture
def fabric(store_url: str) -> Iterator[MemoryFabric]:
    memory = create_memory(store_url, tenant_id="acme", resource_id="user-1", thread_id="t1")
    yield create_memory_fabric(memory)
    memory.close()


def test_create_memory_scope_and_space_mapping(tmp_path: Path) -> None:
    memory = space_memory(tmp_path / "s.db", "notes")
    assert (memory.scope.tenant_id, memory.scope.resource_id, memory.scope.thread_id) == ("afi", "notes", "main")
    assert memory.embedder.name == "hash-fnv1a-384"
    assert memory.limits.top_k == 5 and memory.limits.max_entry_text_chars == 4000
    memory.close()


@pytest.mark.parametrize(
    "limits", [pytest.param({"top_k": 33}, id="top-k-over-cap"), pytest.param({"top_k": 0}, id="top-k-zero")]
)
def test_limits_over_hard_caps_are_refused(tmp_path: Path, limits: dict[str, int]) -> None:
    with pytest.raises(MemoryLimitError):
        create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c", limits=limits)


def test_each_stored_kind_round_trips(fabric: MemoryFabric) -> None:
    fact = fabric.remember(kind="fact", content="User prefers metric units", tags=["prefs"], importance=0.4)
    assert re.fullmatch(r"[0-9a-f]{20}", fact.id)
    assert fact.name == fact.id
    assert fabric.get(fact.id) == fact
    proc = fabric.remember(kind="procedure", content="Deploy via canary first", name="deploy")
    assert fabric.find("procedure", "deploy") == proc
    file = fabric.remember(kind="file", path="docs/a.md")
    assert file.content == "docs/a.md" and file.path == "docs/a.md"
    assert fabric.find_file("docs/a.md") == file
    working = fabric.remember(kind="working", block="core", content="Prefers terse output")
    assert working.kind == "working" and working.block == "core" and working.name == "core"
    assert fabric.blocks()["core"].content == "Prefers terse output"
    assert {n.id for n in fabric.notes()} == {fact.id, proc.id, file.id}


def test_an_id_is_20_hex_and_one_of_12_made_before_still_names_a_note(fabric: MemoryFabric) -> None:
    older = fabric.remember(kind="fact", content="written when ids had 12 digits", id="0123456789ab")
    newer = fabric.remember(kind="fact", content="given its own wide id", id="0123456789abcdef0123")
    assert fabric.get("0123456789ab") == older and fabric.get("0123456789abcdef0123") == newer
    for wrong in ("0123456789abcdef", "0123456789abcdef01234", "0123456789AB"):  # 16, 21, upper case
        with pytest.raises(MemoryValidationError, match="20 lowercase hex characters"):
            fabric.remember(kind="fact", content="x", id=wrong)


def test_timestamps_are_canonical_utc(fabric: MemoryFabric) -> None:
    note = fabric.remember(
        kind="fact", content="Launch day", valid_from="2026-01-01T02:00:00+02:00", t_ref="2026-01-01"
    )
    assert note.valid_from == "2026-01-01T00:00:00.000Z"
    assert note.t_ref == "2026-01-01T00:00:00.000Z"


BAD: list[Any] = [
    pytest.param({"kind": "memo", "content": "x"}, "unknown memory note kind", id="unknown-kind"),
    pytest.param({"kind": "fact", "content": "x", "colour": "red"}, "unknown remember field", id="unknown-field"),
    pytest.param({"kind": "fact"}, "content is required", id="no-content"),
    pytest.param({"kind": "fact", "content": "   "}, "non-empty", id="blank-content"),
    pytest.param({"kind": "fact", "content": "x", "id": "XYZ"}, "20 lowercase hex", id="bad-id"),
    pytest.param(
        {"kind": "working", "block": "core", "content": "x", "id": "aaaaaaaaaaaa"}, "omit id", id="working-id"
    ),
    pytest.param({"kind": "working", "block": "Core!", "content": "x"}, "block must match", id="bad-label"),
    pytest.param({"kind": "working", "content": "x"}, "block must match", id="no-label"),
    pytest.param({"kind": "fact", "content": "x", "block": "core"}, "only valid for kind", id="block-on-fact"),
    pytest.param({"kind": "fact", "content": "x", "path": "a"}, "only valid for kind", id="path-on-fact"),
    pytest.param({"kind": "file"}, "requires a non-empty path", id="file-no-path"),
    pytest.param({"kind": "fact", "content": "x", "valid_from": "yesterday"}, "ISO 8601", id="bad-time"),
    pytest.param({"kind": "fact", "content": "x", "valid_from": "1" * 5000}, "ISO 8601", id="digits-time"),
    pytest.param({"kind": "fact", "content": "x", "valid_to": "20261201\n"}, "ISO 8601", id="newline-time"),
    pytest.param({"kind": "fact", "content": "x", "importance": 1.5}, r"\[0,1\]", id="importance-high"),
    pytest.param({"kind": "fact", "content": "x", "tags": ["ok", ""]}, "non-empty strings", id="empty-tag"),
    pytest.param({"kind": "fact", "content": "x", "context": ""}, "context", id="empty-context"),
    pytest.param({"kind": "fact", "content": "x", "supersedes": "nope"}, "supersedes", id="bad-supersedes"),
    pytest.param({"kind": "fact", "content": "x", "links": [{"id": "zz"}]}, "link id", id="bad-link"),
    pytest.param({"kind": "fact", "content": "x", "name": "a/b"}, "may not contain", id="slash-name"),
    pytest.param({"kind": "fact", "content": "x", "name": ".hidden"}, "may not contain", id="dot-name"),
    pytest.param({"kind": "fact", "content": "x", "name": "n" * 201}, "1..200", id="long-name"),
    pytest.param({"kind": "fact", "content": "x", "consent": {"visible": "yes"}}, "visible", id="bad-consent"),
    pytest.param({"kind": "fact", "content": "x", "reflection_id": "aaaaaaaaaaaa"}, "omit content", id="refl+content"),
    pytest.param({"kind": "fact", "reflection_id": "aaaaaaaaaaaa"}, "observational source", id="refl-no-source"),
    pytest.param({"kind": "episode", "id": "aaaaaaaaaaaa"}, "observational source", id="episode-no-source"),
]


@pytest.mark.parametrize(("fields", "message"), BAD)
def test_bad_input_is_refused_and_writes_nothing(fabric: MemoryFabric, fields: dict[str, Any], message: str) -> None:
    before = fabric.change_seq()
    with pytest.raises(MemoryValidationError, match=message):
        fabric.remember(**fields)
    assert fabric.change_seq() == before
    assert fabric.notes() == [] and fabric.blocks() == {}


def test_content_over_the_cap_is_a_limit_error(tmp_path: Path) -> None:
    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c",
                           limits={"max_entry_text_chars": 10})  # fmt: skip
    fabric = create_memory_fabric(memory)
    with pytest.raises(MemoryLimitError, match="cap is 10"):
        fabric.remember(kind="fact", content="x" * 11)
    assert fabric.notes() == []
    memory.close()


class _Session:
    def __init__(self, sid: str, entries: list[dict[str, Any]]) -> None:
        self.id = sid
        self._entries = entries

    def entries(self) -> list[dict[str, Any]]:
        return self._entries


class _Observational:
    def __init__(self, session: _Session) -> None:
        self.session = session


def test_episode_is_a_view_over_the_observational_source(tmp_path: Path) -> None:
    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c")
    obs = {"type": "observation", "id": "0123456789ab", "content": "User debugged the canary", "timestamp":
           "2026-01-01T00:00:00.000Z", "source_entry_ids": ["m1"]}  # fmt: skip
    fabric = create_memory_fabric(memory, observational=_Observational(_Session("s1", [obs])))
    note = fabric.remember(kind="episode", id="0123456789ab")
    assert note.kind == "episode" and note.content == "User debugged the canary"
    assert note.source_entry_ids == ["m1"]
    assert fabric.change_seq() == 0  # nothing written
    with pytest.raises(MemoryNotFoundError):
        fabric.remember(kind="episode", id="ffffffffffff")
    with pytest.raises(MemoryValidationError, match="omit content"):
        fabric.remember(kind="episode", id="0123456789ab", content="x")
    memory.close()


def test_create_memory_fabric_refuses_bad_options(tmp_path: Path) -> None:
    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c")
    with pytest.raises(MemoryValidationError):
        create_memory_fabric(memory, linker={"top_k": 33})
    with pytest.raises(MemoryValidationError):
        create_memory_fabric(memory, consolidate={"threshold": 2})
    with pytest.raises(MemoryValidationError):
        create_memory_fabric(memory, observational=object())
    memory.close()
