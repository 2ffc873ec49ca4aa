from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from afi.providers.memory import MemoryConflictError, MemoryFabric, Store, create_memory, create_memory_fabric

OLD = "The deploy dashboard for checkout lives at grafana board seven"
NEW = "The deploy dashboard for checkout lives at grafana board eight"


@pytest.fixture
def fabric(store_url: str) -> Iterator[MemoryFabric]:
    memory = create_memory(store_url, tenant_id="acme", resource_id="user-1", thread_id="t1")
    yield create_memory_fabric(memory)
    memory.close()


def test_same_note_is_rewritten_in_place(fabric: MemoryFabric) -> None:
    first = fabric.remember(kind="fact", content=OLD, tags=["ops"], importance=0.3,
                            consent={"source": "user"}, source_entry_ids=["m1"])  # fmt: skip
    again = fabric.remember(kind="fact", content=OLD.upper() + "!", keywords=["grafana"], source_entry_ids=["m2"])
    assert again.id == first.id
    assert again.content == OLD.upper() + "!"  # the new claim wins
    assert again.tags == ["ops"] and again.keywords == ["grafana"] and again.source_entry_ids == ["m1", "m2"]
    assert again.created_at == first.created_at
    assert again.importance == 0.3 and again.consent == first.consent
    assert len(fabric.notes(include_invalid=True)) == 1


def test_changed_content_on_same_subject_supersedes(fabric: MemoryFabric) -> None:
    old = fabric.remember(kind="fact", content=OLD, name="dashboard")
    time.sleep(0.002)  # a version superseded in its own millisecond shows at no instant (test_write_clock)
    other = fabric.remember(kind="fact", content=OLD.replace("seven", "nine"))  # unnamed: folds by similarity
    assert other.supersedes == old.id and other.name == "dashboard"
    retired = fabric.get(old.id)
    assert retired is not None and retired.valid_to is not None
    assert [n.id for n in fabric.notes()] == [other.id]
    assert fabric.find("fact", "dashboard") == other
    assert fabric.find("fact", "dashboard", as_of=old.created_at) == retired
    assert {n.id for n in fabric.notes(include_invalid=True)} == {old.id, other.id}


def test_below_threshold_inserts(fabric: MemoryFabric) -> None:
    a = fabric.remember(kind="fact", content=OLD)
    b = fabric.remember(kind="fact", content="User prefers metric units")
    assert a.id != b.id and b.supersedes is None
    assert len(fabric.notes()) == 2


def test_folding_is_per_kind(fabric: MemoryFabric) -> None:
    fact = fabric.remember(kind="fact", content=OLD)
    proc = fabric.remember(kind="procedure", content=OLD)
    assert proc.id != fact.id and proc.supersedes is None


def test_named_remember_folds_by_name(fabric: MemoryFabric) -> None:
    a = fabric.remember(kind="fact", content="alpha beta", name="greek")
    same = fabric.remember(kind="fact", content="Alpha, beta.", name="greek")
    assert same.id == a.id
    changed = fabric.remember(kind="fact", content="totally different words", name="greek")
    assert changed.supersedes == a.id and changed.name == "greek"
    assert fabric.find("fact", "greek") == changed


def test_file_notes_never_fold_across_paths(fabric: MemoryFabric) -> None:
    a = fabric.remember(kind="file", path="docs/a.md", content=OLD)
    b = fabric.remember(kind="file", path="docs/b.md", content=OLD)
    assert a.id != b.id
    a2 = fabric.remember(kind="file", path="docs/a.md", content="rewritten file text entirely")
    assert a2.id == a.id and a2.content == "rewritten file text entirely"
    assert fabric.find_file("docs/a.md") == a2 and fabric.find_file("docs/b.md") == b


def test_explicit_id_or_supersedes_disables_folding(fabric: MemoryFabric) -> None:
    a = fabric.remember(kind="fact", content=OLD)
    b = fabric.remember(kind="fact", content=OLD, id="0000000000aa")
    assert b.id == "0000000000aa" and b.supersedes is None
    c = fabric.remember(kind="fact", content=NEW, supersedes=a.id)
    assert c.supersedes == a.id and c.id not in (a.id, b.id)
    retired = fabric.get(a.id)
    assert retired is not None and retired.valid_to is not None
    again = fabric.remember(kind="fact", content="new text for the same id", id="0000000000aa")
    assert again.id == "0000000000aa" and again.created_at == b.created_at
    assert fabric.get("0000000000aa") == again


def test_explicit_id_cannot_take_a_held_name(fabric: MemoryFabric) -> None:
    fabric.remember(kind="fact", content="x y z", name="taken")
    before = fabric.change_seq()
    with pytest.raises(MemoryConflictError, match="taken"):
        fabric.remember(kind="fact", content="other", name="taken", id="0000000000bb")
    assert fabric.change_seq() == before


def test_consolidate_false_always_inserts(fabric: MemoryFabric) -> None:
    a = fabric.remember(kind="fact", content=OLD)
    b = fabric.remember(kind="fact", content=OLD, consolidate=False)
    assert a.id != b.id
    off = create_memory_fabric(fabric.memory, consolidate=False)
    c = off.remember(kind="fact", content=OLD)
    assert c.id not in (a.id, b.id)
    assert len(fabric.notes()) == 3


def test_custom_threshold(fabric: MemoryFabric) -> None:
    strict = create_memory_fabric(fabric.memory, consolidate={"threshold": 0.99})
    a = strict.remember(kind="fact", content=OLD)
    b = strict.remember(kind="fact", content=NEW)  # cosine 0.9 < 0.99
    assert b.supersedes is None and a.id != b.id


def test_failed_supersede_leaves_nothing_half_written(fabric: MemoryFabric, monkeypatch: pytest.MonkeyPatch) -> None:
    old = fabric.remember(kind="fact", content=OLD)
    before = fabric.change_seq()

    def disk_full(*args: object, **kwargs: object) -> int:
        raise OSError("disk full")

    monkeypatch.setattr(Store, "insert_note", disk_full)
    with pytest.raises(OSError, match="disk full"):
        fabric.remember(kind="fact", content=NEW)
    monkeypatch.undo()
    kept = fabric.get(old.id)
    assert kept is not None and kept.valid_to is None  # the retire was rolled back with the insert
    assert fabric.change_seq() == before
    assert [n.id for n in fabric.notes(include_invalid=True)] == [old.id]


def test_a_row_is_retired_when_its_successor_starts_never_before_its_own_start() -> None:
    from afi.providers.memory.fabric.clock import retire_at

    start = "2026-01-01T00:00:00.000Z"
    assert retire_at(start, start) == start  # superseded in its first millisecond: an empty window
    assert retire_at("2026-01-01T00:00:00.005Z", start) == "2026-01-01T00:00:00.005Z"
    assert retire_at(start, "2027-01-01T00:00:00.000Z") == "2027-01-01T00:00:00.000Z"  # it starts later
