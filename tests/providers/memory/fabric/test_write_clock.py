"""A scope's write clock: versions written within one millisecond, or by a process whose clock runs
behind, still form one chain with one current version, and a write reads back at once. They used to
fork: a version superseding one started in the same millisecond started a millisecond later, so a
read in that millisecond showed the old version, and the next writer superseded it again."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from afi.providers.memory import create_memory, create_memory_fabric
from afi.providers.memory.fabric import clock, fabric, rows
from afi.providers.memory.fabric.errors import MemoryValidationError

SCOPE = {"tenant_id": "t", "resource_id": "r", "thread_id": "w"}
CURRENT = "SELECT id, content, supersedes FROM notes WHERE status = 'active' AND valid_to IS NULL AND {where}"


def _current(memory: Any, where: str) -> list[tuple[Any, ...]]:
    with memory.store.read() as conn:
        return [tuple(row) for row in conn.execute(CURRENT.format(where=where)).fetchall()]


def _frozen(monkeypatch: pytest.MonkeyPatch, stamp: str) -> None:
    for module in (clock, fabric, rows):  # one process's clock: its stamps, its changes' stamps
        monkeypatch.setattr(module, "iso_now", lambda: stamp)


def _two_ahead_one_behind(monkeypatch: pytest.MonkeyPatch, notes: Any, ahead: str) -> list[Any]:
    """Versions 1 and 2 of the fact x from a replica whose clock reads ``ahead``, then version 3 from
    one at 10:00:00.000."""
    _frozen(monkeypatch, f"2026-12-02T{ahead}Z")
    versions = [notes.remember(kind="fact", name="x", content=f"version {i} of the rule") for i in (1, 2)]
    _frozen(monkeypatch, "2026-12-02T10:00:00.000Z")
    return [*versions, notes.remember(kind="fact", name="x", content="version 3, from a clock behind")]


def test_versions_written_in_one_millisecond_keep_one_current_version(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = create_memory(store_url, **SCOPE)
    notes = create_memory_fabric(memory)
    stamp = "2026-12-02T10:00:00.000Z"
    _frozen(monkeypatch, stamp)
    named = [notes.remember(kind="fact", name="x", content=f"version {i} of the deploy rule") for i in range(6)]
    idea = "the release train leaves on thursday from the main branch after the checks"
    unnamed = [notes.remember(kind="fact", content=f"{idea} {word}") for word in ("", "again", "still", "now")]
    assert [n.supersedes for n in named[1:]] == [n.id for n in named[:-1]]  # one chain, in order
    assert [row[0] for row in _current(memory, "name = 'x'")] == [named[-1].id]
    found = notes.find("fact", "x")
    assert found is not None and found.id == named[-1].id  # a write reads back in its own millisecond
    assert [row[0] for row in _current(memory, "content LIKE 'the release train%'")] == [unnamed[-1].id]
    assert {n.valid_from for n in named[1:]} == {stamp}  # the versions between: empty windows, kept
    assert len([n for n in notes.notes(include_invalid=True) if n.name == "x"]) == 6
    memory.close()


def test_a_writer_whose_clock_runs_behind_folds_into_the_latest_version(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas, the second's clock 200 ms behind the first's."""
    memory = create_memory(store_url, **SCOPE)
    notes = create_memory_fabric(memory)
    first, second, third = _two_ahead_one_behind(monkeypatch, notes, "10:00:00.200")
    assert (second.supersedes, third.supersedes) == (first.id, second.id)
    assert [row[0] for row in _current(memory, "name = 'x'")] == [third.id]
    memory.close()


def test_a_stamp_far_in_the_future_does_not_move_the_clock(store_url: str) -> None:
    """A version dated in 9999 (a bundle may carry any time) is not followed: later writes are stamped
    with the wall clock and read back now, instead of being dated where no read at "now" finds them."""
    memory = create_memory(store_url, **SCOPE)
    notes = create_memory_fabric(memory)
    planted = notes.remember(kind="fact", name="far", content="dated in the far future")
    far = "9999-01-01T00:00:00.000Z"
    memory.store.update_note(memory.scope, planted.model_copy(update={"created_at": far, "updated_at": far}))
    written = notes.remember(kind="fact", name="near", content="written now")
    assert written.created_at < "9999" and notes.find("fact", "near") == written
    memory.close()


def test_a_version_that_would_end_before_it_starts_is_refused(store_url: str) -> None:
    memory = create_memory(store_url, **SCOPE)
    notes = create_memory_fabric(memory)
    kept = notes.remember(kind="fact", name="x", content="the rule as it stands")
    with pytest.raises(MemoryValidationError, match="is not after"):
        notes.remember(kind="fact", name="x", content="a rule that ended in 2020", valid_to="2020-01-01T00:00:00Z")
    assert notes.find("fact", "x") == kept  # nothing was written: the old version is still current
    assert len(notes.notes(include_invalid=True)) == 1
    memory.close()


def test_a_replica_whose_clock_runs_behind_reads_its_own_write(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads without ``as_of`` are taken at the scope's present, not the reader's wall clock: the
    version its own write superseded (retired at the other replica's later time) is not shown."""
    memory = create_memory(store_url, **SCOPE)
    notes = create_memory_fabric(memory)
    third = _two_ahead_one_behind(monkeypatch, notes, "10:00:00.200")[-1]
    found = notes.find("fact", "x")
    assert found is not None and found.id == third.id
    assert [hit.id for hit in notes.recall("version", kinds=["fact"]).hits] == [third.id]
    assert [note.id for note in notes.notes()] == [third.id]
    memory.close()


def test_a_writer_more_than_a_minute_behind_writes_after_the_newest_version(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the minute the clock follows, the version found current at the writer's time was already
    superseded: the write supersedes the newest one instead of forking the chain."""
    memory = create_memory(store_url, **SCOPE)
    notes = create_memory_fabric(memory)
    first, second, third = _two_ahead_one_behind(monkeypatch, notes, "10:02:00.000")
    assert (second.supersedes, third.supersedes) == (first.id, second.id)
    assert [row[0] for row in _current(memory, "name = 'x'")] == [third.id]
    later = notes.find("fact", "x", as_of="2026-12-02T10:03:00.000Z")
    assert later is not None and later.id == third.id
    memory.close()


def test_deletes_and_neighbour_patches_keep_the_clock(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock reads the scope's last changed notes: four deletes (they leave no stamp) or a write
    whose workers patch neighbours must not push a replica's later stamps out of it."""
    from .test_fabric_attach import Session

    memory = create_memory(store_url, **SCOPE)
    plain = create_memory_fabric(memory)
    evolving = create_memory_fabric(memory, consolidate=False, linker=True, evolution=True)
    evolving.attach(Session())
    _frozen(monkeypatch, "2026-12-02T09:59:00.000Z")
    for i in range(5):
        plain.remember(kind="fact", name=f"n{i}", content=f"we deploy the service with a canary release, step {i}")
    others = [
        plain.remember(kind="fact", name=f"o{i}", content=f"an unrelated note {i} about llamas") for i in range(4)
    ]
    _frozen(monkeypatch, "2026-12-02T10:00:30.000Z")  # a replica 30 s ahead
    plain.remember(kind="fact", name="x", content="the first version")
    second = plain.remember(kind="fact", name="x", content="the second version")
    _frozen(monkeypatch, "2026-12-02T10:00:00.000Z")  # this one
    for other in others:
        plain.forget(id=other.id)
    evolving.remember(kind="fact", content="we deploy the service with a canary release", keywords=["rollout"],
                      context="how releases go out")  # fmt: skip
    assert memory.present() >= "2026-12-02T10:00:30.000Z"
    third = plain.remember(kind="fact", name="x", content="the third version")
    assert third.supersedes == second.id
    assert [row[0] for row in _current(memory, "name = 'x'")] == [third.id]
    memory.close()


def test_a_version_dated_far_ahead_is_superseded_once(store_url: str) -> None:
    """A version whose ``created_at`` is in 9999 and whose window has no start (valid since always):
    two writes to its name leave one chain and one current version, each read back at once."""
    memory = create_memory(store_url, **SCOPE)
    notes = create_memory_fabric(memory)
    planted = notes.remember(kind="fact", name="x", content="imported, dated far ahead")
    far = "9999-01-01T00:00:00.000Z"
    memory.store.update_note(memory.scope, planted.model_copy(update={"created_at": far, "updated_at": far}))
    first = notes.remember(kind="fact", name="x", content="written now, first")
    assert notes.find("fact", "x") == first
    second = notes.remember(kind="fact", name="x", content="written now, second")
    assert notes.find("fact", "x") == second and second.supersedes == first.id
    assert [row[0] for row in _current(memory, "name = 'x'")] == [second.id]
    memory.close()


def test_a_version_scheduled_for_later_is_not_taken_for_the_current_one(store_url: str) -> None:
    """A version starting in 2099 where its predecessor ends (a shape a bundle can carry): a write now
    supersedes the predecessor, as it did, and leaves the scheduled version as its writer set it."""
    memory = create_memory(store_url, **SCOPE)
    notes = create_memory_fabric(memory)
    later = "2099-01-01T00:00:00.000Z"
    first = notes.remember(kind="fact", name="x", content="the price is ten")
    scheduled = notes.remember(kind="fact", name="x", content="the price is twelve", valid_from=later)
    memory.store.update_note(memory.scope, first.model_copy(update={"valid_to": later}))  # ends where it starts
    written = notes.remember(kind="fact", name="x", content="the price is eleven")
    assert written.supersedes == first.id and notes.find("fact", "x") == written
    kept = notes.get(scheduled.id)
    assert kept is not None and (kept.valid_from, kept.valid_to) == (later, None)
    memory.close()


def test_the_clock_is_one_lookup_after_many_deletes(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every change carries the scope's stamp forward, deletes too: after a replica ahead wrote, 200
    forgets here leave the present where that replica put it."""
    memory = create_memory(store_url, **SCOPE)
    notes = create_memory_fabric(memory)
    _frozen(monkeypatch, "2026-12-02T09:59:00.000Z")
    doomed = [notes.remember(kind="fact", name=f"d{i}", content=f"note {i} to forget") for i in range(200)]
    _frozen(monkeypatch, "2026-12-02T10:00:30.000Z")
    notes.remember(kind="fact", name="x", content="written ahead")
    _frozen(monkeypatch, "2026-12-02T10:00:00.000Z")
    for note in doomed:
        notes.forget(id=note.id)
    assert memory.present() >= "2026-12-02T10:00:30.000Z"
    memory.close()


_WRITER = textwrap.dedent(
    """
    import sys
    from afi.provider import Caller
    from afi.providers.memory.provider import MemoryProvider

    provider = MemoryProvider(sys.argv[1], sys.argv[2])
    owner = Caller(principal="local", space="default")
    for i in range(int(sys.argv[4])):
        provider.remember(owner, kind="fact", name="x", content=f"{sys.argv[3]} wrote version {i}")
        print(i, flush=True)
    """
)


def test_three_processes_writing_one_fact_leave_one_current_version(store_url: str, tmp_path: Path) -> None:
    """The fact ``x`` (``/facts/x.md``) remembered 150 times by each of three processes through the
    provider, under its space lock as through every door: one chain of versions, one current."""
    env = {"PYTHONPATH": ":".join(sys.path), "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-c", _WRITER, store_url, str(tmp_path / "files")]
    writers = [subprocess.Popen([*command, name, "150"], stdout=subprocess.PIPE, text=True, env=env) for name in "abc"]
    acknowledged = 0
    for writer in writers:
        out, _ = writer.communicate(timeout=600)
        assert writer.returncode == 0
        acknowledged += len(out.split())
    memory = create_memory(store_url, tenant_id="afi", resource_id="default", thread_id="main")
    current = _current(memory, "name = 'x'")
    with memory.store.read() as conn:
        versions = conn.execute("SELECT id, supersedes FROM notes WHERE name = 'x'").fetchall()
    forks = len(versions) - len({row[1] for row in versions})  # two versions superseding one note
    print(f"3 processes, {acknowledged} writes of the fact x: {len(versions)} versions, {len(current)} current, "
          f"{forks} forks")  # fmt: skip
    assert acknowledged == 450
    assert len(current) == 1 and forks == 0
    assert current[0][1].endswith("wrote version 149")  # the last write of one of them
    memory.close()
