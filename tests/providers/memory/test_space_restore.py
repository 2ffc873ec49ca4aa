"""``afi space restore SPACE@WHEN``: then's state written as new versions, nothing of today lost, on each engine."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from afi.errors import Forbidden, InvalidPath, NotFound
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider

OWNER = Caller(principal="local", space="default")
READER = Caller(principal="reader", space="default", scopes=frozenset({"afi:read"}))


def instant(delay: float = 0.0) -> str:
    time.sleep(0.01)  # versions are stamped to the millisecond
    moment = datetime.fromtimestamp(time.time() + delay, UTC).isoformat(timespec="milliseconds")
    time.sleep(0.01)
    return moment.replace("+00:00", "Z")


@pytest.fixture
def changed(tmp_path: Path, store_url: str) -> Iterator[tuple[MemoryProvider, str]]:
    """Notes and files at the snapshot ``monday``; then every kind of change, up to the instant returned."""
    provider = MemoryProvider(store_url, tmp_path / "files")
    provider.write(OWNER, "/facts/deploy.md", b"---\ntags: [release]\n---\nWe deploy with a zebra canary")
    provider.write(OWNER, "/facts/same.md", b"Nothing changes here")
    provider.remember(OWNER, kind="procedure", name="freeze", content="Code freeze this week", valid_to=instant(0.4))
    provider.write(OWNER, "/files/plan.txt", b"plan: ship the heron release")
    provider.write(OWNER, "/files/old.txt", b"deleted after monday")
    provider.snapshot_create(OWNER, "monday")
    time.sleep(0.01)
    provider.write(OWNER, "/facts/deploy.md", b"We deploy blue-green with an okapi gate")
    provider.write(OWNER, "/facts/oncall.md", b"The oncall rota lives in the ibis sheet")
    provider.write(OWNER, "/files/plan.txt", b"plan: ship the okapi release")
    provider.delete(OWNER, "/files/old.txt")
    provider.write(OWNER, "/files/new.txt", b"written after monday")
    time.sleep(0.45)  # the freeze expires
    yield provider, instant()


def names(provider: MemoryProvider, path: str) -> list[str]:
    return [e.path.rsplit("/", 1)[1] for e in provider.list(OWNER, path).entries]


def text(provider: MemoryProvider, path: str) -> str:
    """What a note says: the text after its front matter, and its tags."""
    rendered: str = provider.read(OWNER, path).data.decode()
    tags = [line for line in rendered.splitlines() if line.startswith("- ")]
    return rendered.rsplit("---\n", 1)[1] + "|".join(tags)


def note_versions(provider: MemoryProvider) -> list[str]:
    """The fact and procedure versions in ``/history`` (a file's note goes with the file, as a delete asks)."""
    found = [name for name in names(provider, "/history") if name.endswith(".md")]
    return [name for name in found if b"kind: file" not in provider.read(OWNER, f"/history/{name}").data]


def test_a_restore_writes_then_as_new_versions_and_loses_nothing_of_today(
    changed: tuple[MemoryProvider, str],
) -> None:
    provider, tuesday = changed
    history = note_versions(provider)
    okapi = provider.fabric("default").find("fact", "deploy")
    assert okapi is not None
    dry = provider.space_restore(OWNER, "monday", dry_run=True)
    assert (dry.brought_back, dry.changed, dry.retired) == (["/procedures/freeze.md"], ["/facts/deploy.md"],
                                                            ["/facts/oncall.md"])  # fmt: skip
    assert (dry.files_written, dry.files_deleted, dry.applied) == (["old.txt", "plan.txt"], ["new.txt"], False)
    assert note_versions(provider) == history and names(provider, "/facts") == ["deploy.md", "oncall.md", "same.md"]
    steps: list[tuple[str, int, int]] = []
    done = provider.space_restore(OWNER, "monday", progress=lambda *step: steps.append(step))
    assert done.applied and (done.changed, done.files_deleted) == (dry.changed, dry.files_deleted)
    assert steps[-1] == ("files", 3, 3) and ("notes", 3, 3) in steps
    assert provider.audit_log(limit=1)[0]["verb"] == "restore"
    # /facts and /procedures say what they said on monday, /files hold monday's bytes
    for area in ("facts", "procedures"):
        assert names(provider, f"/{area}") == names(provider, f"/.afi/at/monday/{area}")
        for name in names(provider, f"/{area}"):
            assert text(provider, f"/{area}/{name}") == text(provider, f"/.afi/at/monday/{area}/{name}")
    assert names(provider, "/files") == ["old.txt", "plan.txt"]
    assert provider.read(OWNER, "/files/plan.txt").data == b"plan: ship the heron release"
    assert provider.read(OWNER, "/files/old.txt").data == b"deleted after monday"
    # nothing of today is lost: its versions stay in /history, its files in the file history
    after = note_versions(provider)
    assert set(history) < set(after) and len(after) > len(history)
    assert b"okapi gate" in provider.read(OWNER, f"/history/{okapi.id}.md").data
    assert names(provider, f"/.afi/at/{tuesday}/facts") == ["deploy.md", "oncall.md", "same.md"]
    assert provider.read(OWNER, f"/.afi/at/{tuesday}/files/new.txt").data == b"written after monday"
    assert provider.read(OWNER, f"/.afi/at/{tuesday}/files/plan.txt").data == b"plan: ship the okapi release"
    restored = provider.read(OWNER, "/facts/deploy.md").data.decode()
    assert f"supersedes: {okapi.id}" in restored  # a new version of today's
    diff = provider.diff(OWNER, "monday", "now")
    assert (diff.added, diff.changed, diff.retired) == ([], [], [])
    # a second restore finds nothing to do, and does nothing
    again = provider.space_restore(OWNER, "monday")
    assert again.empty and note_versions(provider) == after


def test_a_restore_to_an_instant_and_its_refusals(changed: tuple[MemoryProvider, str]) -> None:
    provider, tuesday = changed
    before = note_versions(provider)
    with pytest.raises(NotFound, match="no snapshot named 'sunday'"):
        provider.space_restore(OWNER, "sunday")
    with pytest.raises(InvalidPath, match="still to come"):
        provider.space_restore(OWNER, "2099-01-01")
    with pytest.raises(InvalidPath, match="not an instant"):
        provider.space_restore(OWNER, "2026-99-99")
    with pytest.raises(InvalidPath, match="name the instant"):
        provider.space_restore(OWNER, "")
    with pytest.raises(Forbidden):
        provider.space_restore(READER, "monday")
    assert provider.space_restore(READER, "monday", dry_run=True).changed == ["/facts/deploy.md"]
    assert note_versions(provider) == before
    provider.write(OWNER, "/facts/deploy.md", b"A third way to deploy")
    provider.space_restore(OWNER, tuesday)  # an ISO instant: back to the okapi gate, oncall kept
    assert b"okapi gate" in provider.read(OWNER, "/facts/deploy.md").data
    assert names(provider, "/facts") == ["deploy.md", "oncall.md", "same.md"]
    assert provider.space_restore(OWNER, tuesday).empty


def test_a_restore_on_a_replica_whose_clock_runs_behind(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another replica, 20 s ahead, wrote the last two versions: a restore here still reads them as
    today's (the scope's present, not this wall clock) and writes the version of then after them."""
    from afi.providers.memory.fabric import clock, fabric, rows

    provider = MemoryProvider(store_url, tmp_path / "files")
    provider.write(OWNER, "/facts/deploy.md", b"We deploy with a zebra canary")
    then = instant()
    with monkeypatch.context() as ahead:
        for module in (clock, fabric, rows):
            ahead.setattr(module, "iso_now", lambda: instant(20))
        provider.write(OWNER, "/facts/deploy.md", b"We deploy blue-green with an okapi gate")
        provider.write(OWNER, "/facts/deploy.md", b"We deploy on fridays with a heron")
    plan = provider.space_restore(OWNER, then)
    assert plan.changed == ["/facts/deploy.md"]
    assert text(provider, "/facts/deploy.md") == "We deploy with a zebra canary\n"
    later = provider.fabric("default").find("fact", "deploy", as_of=instant(25))
    assert later is not None and later.content == "We deploy with a zebra canary"


def test_moves_and_snapshots_on_a_replica_whose_clock_runs_behind(
    tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica 30 s ahead wrote the second version of a fact. Here, a move of a folder of 8 files
    (8 file notes rewritten) leaves that version current, and a snapshot taken now names an instant
    that shows it."""
    from afi.providers.memory.fabric import clock, fabric, rows

    provider = MemoryProvider(store_url, tmp_path / "files")
    for i in range(8):
        provider.write(OWNER, f"/files/dir/f{i}.txt", f"file {i} about llamas".encode())
    provider.write(OWNER, "/facts/x.md", b"the first version")
    with monkeypatch.context() as ahead:
        for module in (clock, fabric, rows):
            ahead.setattr(module, "iso_now", lambda: instant(30))
        provider.write(OWNER, "/facts/x.md", b"the second version, from a replica ahead")
    provider.move(OWNER, "/files/dir", "/files/moved")
    assert text(provider, "/facts/x.md") == "the second version, from a replica ahead\n"
    snapshot = provider.snapshot_create(OWNER, "after-second")
    assert text(provider, f"/.afi/at/{snapshot.name}/facts/x.md") == "the second version, from a replica ahead\n"
    assert provider.space_restore(OWNER, snapshot.name, dry_run=True).empty
