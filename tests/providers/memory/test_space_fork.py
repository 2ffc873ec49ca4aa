"""``afi space fork SRC[@WHEN] DST``: a new space as SRC stood at an instant, its history whole, on each engine."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from afi.errors import Conflict, InvalidPath, NotFound
from afi.model import SearchRequest
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider

SRC = Caller(principal="local", space="default")
DST = Caller(principal="local", space="copy")


def instant() -> str:
    time.sleep(0.01)  # versions are stamped to the millisecond
    moment = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    time.sleep(0.01)
    return moment


@pytest.fixture
def monday(tmp_path: Path, store_url: str) -> Iterator[MemoryProvider]:
    """A space with a history before the snapshot ``monday`` and changes after it."""
    provider = MemoryProvider(store_url, tmp_path / "files")
    provider.write(SRC, "/facts/deploy.md", b"We deploy with a zebra canary")
    provider.write(SRC, "/facts/deploy.md", b"---\ntags: [release]\n---\nWe deploy with a zebra canary on Mondays")
    provider.write(SRC, "/procedures/rollback.md", b"Roll back with the walrus switch")
    provider.write(SRC, "/files/notes/plan.txt", b"plan: ship the heron release")
    provider.write(SRC, "/files/gone.txt", b"deleted after monday")
    provider.append_block(SRC, "persona", "Terse and kind")
    provider.fabric("default").memory.revoke_source("entry-1", "corrected")
    provider.snapshot_create(SRC, "monday")
    time.sleep(0.01)
    provider.write(SRC, "/facts/deploy.md", b"We deploy blue-green with an okapi gate")
    provider.write(SRC, "/facts/oncall.md", b"The oncall rota lives in the ibis sheet")
    provider.write(SRC, "/files/notes/plan.txt", b"plan: ship the okapi release")
    provider.delete(SRC, "/files/gone.txt")
    provider.write(SRC, "/files/new.txt", b"written after monday")
    yield provider


def listed(provider: MemoryProvider, caller: Caller, path: str) -> list[str]:
    return [e.path.rsplit("/", 1)[1] for e in provider.list(caller, path).entries]


def note_versions(provider: MemoryProvider, caller: Caller) -> list[str]:
    """The note versions ``/history`` lists (its ``files`` folder left out)."""
    return [name for name in listed(provider, caller, "/history") if name.endswith(".md")]


def body(provider: MemoryProvider, caller: Caller, path: str) -> str:
    """A note's rendering without the lines a later change to the row itself sets (its window's end, its update)."""
    text = provider.read(caller, path).data.decode()
    return "\n".join(line for line in text.splitlines() if not line.startswith(("valid_to:", "updated_at:")))


def test_a_fork_at_a_snapshot_is_the_source_as_it_stood_then_with_its_history(monday: MemoryProvider) -> None:
    provider = monday
    made = provider.space_fork(DST, "default@monday")
    assert (made.source, made.dest, made.at) == ("default", "copy", provider.snapshot_list(SRC)[0].at)
    assert (made.blocks, made.snapshots, made.files) == (1, 1, 2)
    then = "/.afi/at/monday"
    for area in ("facts", "procedures"):
        assert listed(provider, DST, f"/{area}") == listed(provider, SRC, f"{then}/{area}")
        for name in listed(provider, DST, f"/{area}"):  # the very versions of then, ids and times included
            assert body(provider, DST, f"/{area}/{name}") == body(provider, SRC, f"{then}/{area}/{name}")
    assert b"zebra canary on Mondays" in provider.read(DST, "/facts/deploy.md").data
    assert b"valid_to" not in provider.read(DST, "/facts/deploy.md").data  # superseded only after monday
    # /history holds every note version written by monday: the first deploy too, not what came later
    notes_then = {
        e.path.rsplit("/", 1)[1]
        for e in provider.list(SRC, f"{then}/history").entries
        if b"kind: file" not in provider.read(SRC, e.path).data
    }
    history = set(note_versions(provider, DST))
    assert len(notes_then) == 3 and notes_then <= history
    assert not any(b"okapi" in provider.read(DST, f"/history/{n}").data for n in history)
    # the snapshot came along, and shows in DST what it showed in SRC
    assert listed(provider, DST, "/.afi/at") == ["monday"]
    assert listed(provider, DST, f"{then}/facts") == ["deploy.md"]
    # the files as they stood, with their notes, index and history following
    assert listed(provider, DST, "/files") == ["gone.txt", "notes"]
    assert provider.read(DST, "/files/notes/plan.txt").data == b"plan: ship the heron release"
    assert provider.read(DST, "/files/gone.txt").data == b"deleted after monday"
    assert listed(provider, DST, f"{then}/files/notes") == ["plan.txt"]
    assert provider.fabric("copy").memory.revoked_sources() == {"entry-1": "corrected"}
    assert provider.read(DST, "/working/persona.md").data.decode().rstrip().endswith("Terse and kind")
    found = provider.search(DST, SearchRequest.model_validate({"query": "heron"}))
    assert "/files/notes/plan.txt" in [m.path for m in found.matches]
    found = provider.search(DST, SearchRequest.model_validate({"query": "zebra"}))
    assert "/facts/deploy.md" in [m.path for m in found.matches]
    # SRC is as it was
    assert listed(provider, SRC, "/facts") == ["deploy.md", "oncall.md"]
    assert provider.read(SRC, "/files/notes/plan.txt").data == b"plan: ship the okapi release"
    assert [r["verb"] for r in provider.audit_log(limit=1)] == ["fork"]


def test_a_fork_of_now_takes_everything_current(monday: MemoryProvider) -> None:
    provider = monday
    provider.space_fork(DST, "default")
    assert listed(provider, DST, "/facts") == ["deploy.md", "oncall.md"]
    assert listed(provider, DST, "/files") == ["new.txt", "notes"]
    assert provider.read(DST, "/facts/deploy.md").data == provider.read(SRC, "/facts/deploy.md").data
    assert len(note_versions(provider, DST)) >= 5  # four fact and procedure versions, and the files' notes


def test_fork_refusals_are_clear_and_write_nothing(monday: MemoryProvider) -> None:
    provider = monday
    with pytest.raises(InvalidPath, match="into itself"):
        provider.space_fork(SRC, "default@monday")
    with pytest.raises(NotFound, match="no snapshot named 'sunday'"):
        provider.space_fork(DST, "default@sunday")
    with pytest.raises(InvalidPath, match="still to come"):
        provider.space_fork(DST, "default@2099-01-01")
    with pytest.raises(InvalidPath, match="not an instant"):
        provider.space_fork(DST, "default@2026-99-99")
    with pytest.raises(InvalidPath, match="invalid space name"):
        provider.space_fork(DST, "Bad Name@monday")
    with pytest.raises(InvalidPath, match="name an instant"):
        provider.space_fork(DST, "default@")
    with pytest.raises(NotFound, match="holds nothing"):
        provider.space_fork(DST, "nowhere")
    with pytest.raises(InvalidPath, match="invalid space name"):
        provider.space_fork(Caller(principal="local", space="../x"), "default")
    assert note_versions(provider, DST) == [] and listed(provider, DST, "/files") == []
    provider.write(DST, "/facts/mine.md", b"Already here")
    with pytest.raises(Conflict, match=r"'copy' is not empty \(1 note versions"):
        provider.space_fork(DST, "default@monday")
    assert listed(provider, DST, "/facts") == ["mine.md"]
    assert [r["result"] for r in provider.audit_log(limit=1)] == ["conflict"]


def test_a_failed_fork_leaves_the_new_space_empty(monday: MemoryProvider, tmp_path: Path) -> None:
    provider = monday
    blocker = tmp_path / "files" / "copy"
    blocker.write_text("a file where the space's workspace folder would go")
    with pytest.raises(InvalidPath, match="not a real folder"):  # refused after the notes went in: undone
        provider.space_fork(DST, "default@monday")
    assert listed(provider, DST, "/facts") == [] and note_versions(provider, DST) == []
    assert listed(provider, DST, "/.afi/at") == [] and provider.fabric("copy").blocks() == {}
    assert blocker.read_text().startswith("a file")  # what the fork did not write, it leaves
    blocker.unlink()
    assert provider.space_fork(DST, "default@monday").versions == 3  # nothing half-written stands in the way
    assert listed(provider, DST, "/facts") == ["deploy.md"]
    for query in ("zebra canary", {"semantic": "zebra canary"}):  # the indexes hold the committed notes, once
        found = provider.search(DST, SearchRequest.model_validate({"query": query, "path": "/facts"}))
        assert [m.path for m in found.matches] == ["/facts/deploy.md"]
