"""Workspace file history on each engine: every write, delete and move keeps a version, shown under
``/history/files`` and ``/.afi/at/<instant>/files`` (list, read, search), stored once per content;
``afi gc`` drops the distant past and keeps the last N days exact."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from afi.errors import Forbidden, InvalidPath, NotFound
from afi.model import SearchRequest
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from afi.storage.database import open_database

OWNER = Caller(principal="local", space="default")


def instant() -> str:
    time.sleep(0.01)  # versions are stamped to the millisecond
    moment = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    time.sleep(0.01)
    return moment


def days_ago(days: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def names(provider: MemoryProvider, path: str) -> list[str]:
    return [e.path.rsplit("/", 1)[1] for e in provider.list(OWNER, path).entries]


def count(url: str, sql: str) -> int:
    with open_database(url).read() as conn:
        return int(conn.execute(sql).fetchone()[0])


def test_each_instant_shows_the_files_as_they_stood(provider: MemoryProvider) -> None:
    t = {"before": instant()}
    provider.write(OWNER, "/files/notes/todo.txt", b"feed the zebra\n")
    t["one"] = instant()
    provider.write(OWNER, "/files/notes/todo.txt", b"feed the okapi\n")
    provider.write(OWNER, "/files/logo.bin", bytes(range(256)))
    t["two"] = instant()
    provider.move(OWNER, "/files/notes/todo.txt", "/files/done.txt")
    t["three"] = instant()
    provider.delete(OWNER, "/files/done.txt")
    t["four"] = instant()

    at = {k: f"/.afi/at/{v}/files" for k, v in t.items()}
    assert names(provider, at["before"]) == []
    assert names(provider, f"/.afi/at/{t['one']}") == [
        "episodes",
        "facts",
        "files",
        "history",
        "procedures",
        "sessions",
    ]
    assert names(provider, at["one"]) == ["notes"] and names(provider, f"{at['one']}/notes") == ["todo.txt"]
    assert provider.read(OWNER, f"{at['one']}/notes/todo.txt").data == b"feed the zebra\n"
    assert names(provider, at["two"]) == ["logo.bin", "notes"]
    assert provider.read(OWNER, f"{at['two']}/notes/todo.txt").data == b"feed the okapi\n"
    assert provider.read(OWNER, f"{at['two']}/logo.bin").data == bytes(range(256))
    assert provider.read(OWNER, f"{at['two']}/logo.bin", offset=250, length=3).data == bytes([250, 251, 252])
    assert names(provider, at["three"]) == ["done.txt", "logo.bin"]
    assert names(provider, at["four"]) == ["logo.bin"]
    with pytest.raises(NotFound):
        provider.read(OWNER, f"{at['four']}/done.txt")
    entry = provider.stat(OWNER, f"{at['one']}/notes/todo.txt")
    assert entry.type == "file" and entry.size == 15 and entry.attributes["permissions"] == "r"
    assert provider.stat(OWNER, f"{at['one']}/notes").type == "directory"

    found = provider.search(OWNER, SearchRequest(query="zebra", path=f"/.afi/at/{t['one']}"))
    assert [m.path for m in found.matches] == [f"{at['one']}/notes/todo.txt"]
    assert provider.search(OWNER, SearchRequest(query="zebra", path=at["two"])).matches == []
    okapi = provider.search(OWNER, SearchRequest(query="okapi", path=at["three"]))
    assert [m.path for m in okapi.matches] == [f"{at['three']}/done.txt"]


def test_history_files_lists_and_reads_every_version(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/files/notes/todo.txt", b"feed the zebra\n")
    provider.write(OWNER, "/files/notes/todo.txt", b"feed the okapi\n")
    provider.move(OWNER, "/files/notes/todo.txt", "/files/done.txt")
    provider.delete(OWNER, "/files/done.txt")
    assert "files" in names(provider, "/history")
    assert names(provider, "/history/files") == ["done.txt", "notes"]
    versions = names(provider, "/history/files/notes/todo.txt")
    assert len(versions) == 3 and versions[2].endswith("Z.moved-away") and versions == sorted(versions)
    folder = "/history/files/notes/todo.txt"
    assert [provider.read(OWNER, f"{folder}/{v}").data for v in versions] == [
        b"feed the zebra\n", b"feed the okapi\n", b""
    ]  # fmt: skip
    done = names(provider, "/history/files/done.txt")
    assert len(done) == 2 and done[1].endswith("Z.deleted")
    assert provider.read(OWNER, f"/history/files/done.txt/{done[0]}").data == b"feed the okapi\n"
    entry = provider.stat(OWNER, f"{folder}/{versions[0]}")
    assert entry.type == "file" and entry.attributes["x-op"] == "write" and entry.attributes["permissions"] == "r"
    hits = provider.search(OWNER, SearchRequest(query="zebra", path="/history"))
    assert [m.path for m in hits.matches] == [f"{folder}/{versions[0]}"]
    with pytest.raises(NotFound):
        provider.list(OWNER, "/history/files/never.txt")


def test_identical_bytes_are_stored_once(provider: MemoryProvider) -> None:
    for path in ("/files/a.txt", "/files/b.txt", "/files/c/d.txt"):
        provider.write(OWNER, path, b"the same twelve bytes")
    provider.write(OWNER, "/files/a.txt", b"something else")
    provider.write(OWNER, "/files/a.txt", b"the same twelve bytes")
    url = str(provider.db)
    assert count(url, "SELECT count(*) FROM file_versions") == 5
    assert count(url, "SELECT count(*) FROM file_blobs") == 2


def test_a_file_from_before_is_kept_at_its_first_change(provider: MemoryProvider, tmp_path: Path) -> None:
    """A file the history has no row of (written on disk directly) keeps its bytes when first changed,
    stamped with its modification time; before that change the instant shows today's bytes."""
    folder = tmp_path / "files" / "default"
    folder.mkdir(parents=True)
    (folder / "old.txt").write_bytes(b"written by hand long ago")
    old = time.time() - 3 * 86400
    os.utime(folder / "old.txt", (old, old))
    two_days_ago = days_ago(2)
    assert provider.read(OWNER, f"/.afi/at/{two_days_ago}/files/old.txt").data == b"written by hand long ago"
    assert names(provider, f"/.afi/at/{days_ago(4)}/files") == []
    provider.write(OWNER, "/files/old.txt", b"rewritten today")
    assert provider.read(OWNER, f"/.afi/at/{two_days_ago}/files/old.txt").data == b"written by hand long ago"
    assert len(names(provider, "/history/files/old.txt")) == 2


def test_the_past_is_read_only(provider: MemoryProvider) -> None:
    provider.write(OWNER, "/files/a.txt", b"kept")
    version = names(provider, "/history/files/a.txt")[0]
    moment = instant()
    for path in (f"/history/files/a.txt/{version}", "/history/files/b.txt", f"/.afi/at/{moment}/files/a.txt"):
        with pytest.raises(Forbidden):
            provider.write(OWNER, path, b"rewrite the past")
        with pytest.raises(Forbidden):
            provider.delete(OWNER, path)
    with pytest.raises(InvalidPath):
        provider.read(OWNER, f"/.afi/at/{moment}/files")


def test_gc_keeps_the_last_days_exact_and_drops_the_rest(provider: MemoryProvider) -> None:
    space = provider._space("default")
    history = space.files
    history.record_write("plan.txt", b"plan from 100 days ago", days_ago(100))
    history.record_write("plan.txt", b"plan from 50 days ago", days_ago(50))
    history.record_write("plan.txt", b"plan from 10 days ago", days_ago(10))
    history.record_write("gone.txt", b"gone file", days_ago(90))
    history.record_delete("gone.txt", days_ago(80))
    provider.write(OWNER, "/files/plan.txt", b"plan from 10 days ago")  # today's bytes, the same blob
    # a fact superseded 100 days ago (and one held for the auditors), and a current one
    provider.write(OWNER, "/facts/deploy.md", b"We deploy on Mondays")
    provider.write(OWNER, "/facts/deploy.md", b"We deploy on Fridays")
    provider.write(OWNER, "/facts/audit.md", b"Held for the auditors")
    provider.write(OWNER, "/facts/audit.md", b"Audit rules changed")
    url = str(provider.db)
    with open_database(url).transaction() as conn:
        conn.execute("UPDATE notes SET valid_to = ? WHERE valid_to IS NOT NULL", (days_ago(100),))
        conn.execute("UPDATE notes SET status = 'legal_hold' WHERE valid_to IS NOT NULL AND content LIKE 'Held%'")
    changes = count(url, "SELECT count(*) FROM note_changes")
    five = days_ago(5)
    before = provider.read(OWNER, f"/.afi/at/{five}/files/plan.txt").data
    assert before == b"plan from 10 days ago"
    at_forty = provider.read(OWNER, f"/.afi/at/{days_ago(40)}/files/plan.txt").data
    assert at_forty == b"plan from 50 days ago"

    with pytest.raises(InvalidPath, match="0 or more"):
        provider.gc(OWNER, -1)
    dry = provider.gc(OWNER, 30, dry_run=True)
    assert count(url, "SELECT count(*) FROM file_versions") == 6
    report = provider.gc(OWNER, 30)
    assert (dry.file_versions, dry.blobs, dry.note_versions) == (report.file_versions, report.blobs,
                                                                 report.note_versions)  # fmt: skip
    # plan.txt: the 100-day row goes (the 50-day one says what it held 30 days ago); gone.txt: its write
    assert report.file_versions == 2 and report.blobs == 2
    assert report.bytes_freed == len(b"plan from 100 days ago") + len(b"gone file")
    assert report.note_versions == 1 and report.change_rows > 0
    assert count(url, "SELECT count(*) FROM file_blobs") == 2
    assert provider.read(OWNER, f"/.afi/at/{five}/files/plan.txt").data == before
    assert provider.read(OWNER, "/files/plan.txt").data == b"plan from 10 days ago"
    # an instant before the boundary is no longer exact (a note retired 35 days ago is gone): refused, by
    # every way of naming one, rather than shown wrong
    for older in (days_ago(40), days_ago(95)):
        with pytest.raises(InvalidPath, match="no exact past of this space before"):
            provider.read(OWNER, f"/.afi/at/{older}/files/plan.txt")
        with pytest.raises(InvalidPath, match="no exact past"):
            provider.list(OWNER, f"/.afi/at/{older}/facts")
    with pytest.raises(InvalidPath, match="no exact past"):
        provider.space_restore(OWNER, days_ago(40))
    with pytest.raises(InvalidPath, match="no exact past"):
        provider.diff(OWNER, days_ago(40), "now")
    provider.snapshot_create(OWNER, "old", days_ago(40))  # naming it is allowed; looking through it is not
    with pytest.raises(InvalidPath, match="no exact past"):
        provider.list(OWNER, "/.afi/at/old/facts")
    assert provider.gc(OWNER, 60).file_versions == 0, "a later gc with a longer window"
    with pytest.raises(InvalidPath, match="no exact past"):
        provider.list(OWNER, f"/.afi/at/{days_ago(40)}/facts")  # the horizon never moves back
    # the change log keeps one row per note, and readers still see the notes as they are
    assert count(url, "SELECT count(*) FROM note_changes") < changes
    assert (
        count(url, "SELECT count(*) FROM (SELECT note_id FROM note_changes GROUP BY note_id HAVING count(*) > 1) x")
        == 0
    )
    assert b"Fridays" in provider.read(OWNER, "/facts/deploy.md").data
    assert count(url, "SELECT count(*) FROM notes WHERE content = 'We deploy on Mondays'") == 0
    assert count(url, "SELECT count(*) FROM notes WHERE status = 'legal_hold'") == 1
    assert provider.search(OWNER, SearchRequest(query={"semantic": "when do we deploy"}, path="/facts")).matches
    again = provider.gc(OWNER, 30)
    assert (again.file_versions, again.blobs, again.note_versions) == (0, 0, 0)
    audit = [row for row in provider.audit_log(limit=10) if row["verb"] == "gc"]
    assert [row["result"] for row in audit] == ["ok", "ok", "ok", "invalid_path"]


def test_the_gc_horizon_goes_with_a_fork_and_a_bundle(provider: MemoryProvider, tmp_path: Path) -> None:
    """A fork or an import holds only what the gc'd source kept, so its older instants are refused too."""
    from afi.app.local import local_owner
    from afi.providers.memory.bundle import export_bundle, import_bundle

    history = provider._space("default").files
    history.record_write("plan.txt", b"plan from 100 days ago", days_ago(100))
    history.record_write("plan.txt", b"plan from 50 days ago", days_ago(50))
    provider.write(OWNER, "/files/plan.txt", b"plan for today")
    assert provider.gc(OWNER, 30).file_versions == 1
    copy = Caller(principal="local", space="copy")
    provider.space_fork(copy, "default")
    export_bundle(provider, tmp_path / "bundle", local_owner)
    elsewhere = MemoryProvider(tmp_path / "elsewhere.db", tmp_path / "elsewhere")
    import_bundle(elsewhere, tmp_path / "bundle", local_owner)
    for store, caller in ((provider, copy), (elsewhere, OWNER)):
        assert store.read(caller, f"/.afi/at/{days_ago(5)}/files/plan.txt").data == b"plan from 50 days ago"
        with pytest.raises(InvalidPath, match="no exact past of this space before"):
            store.list(caller, f"/.afi/at/{days_ago(40)}/files")
    export_bundle(elsewhere, tmp_path / "again", local_owner)  # and the round trip stays byte for byte
    for path in sorted((tmp_path / "bundle").rglob("*.json")):
        assert (tmp_path / "again" / path.relative_to(tmp_path / "bundle")).read_bytes() == path.read_bytes()


def test_a_bundle_cannot_close_a_space_past_with_a_future_horizon(tmp_path: Path) -> None:
    """A horizon only rises, so one in the future would refuse every instant of the space for good."""
    import json

    from afi.app.local import local_owner
    from afi.providers.memory.bundle import export_bundle, import_bundle
    from afi.providers.memory.bundle.layout import file_sha256

    source = MemoryProvider(tmp_path / "a.db", tmp_path / "a")
    source.write(OWNER, "/files/plan.txt", b"plan for today")
    export_bundle(source, tmp_path / "bundle", local_owner)
    [state] = list((tmp_path / "bundle").rglob("space.json"))
    state.write_text(json.dumps({**json.loads(state.read_text()), "gc_horizon": "9999-01-01T00:00:00.000Z"}))
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    manifest["checksums"][str(state.relative_to(tmp_path / "bundle"))] = file_sha256(state)
    (tmp_path / "bundle" / "manifest.json").write_text(json.dumps(manifest))
    target = MemoryProvider(tmp_path / "b.db", tmp_path / "b")
    with pytest.raises(InvalidPath, match="gc_horizon is later than now"):
        import_bundle(target, tmp_path / "bundle", local_owner)
    assert target.list(OWNER, "/files").entries == []  # nothing imported
