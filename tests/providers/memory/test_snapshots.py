"""Snapshots: named instants of a space, shown at ``/.afi/at/<name>/`` and listed at ``/.afi/at``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from afi.errors import Conflict, Forbidden, InvalidPath, NotFound
from afi.model import SearchRequest
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from tests.support.cli import afi

OWNER = Caller(principal="local", space="default")
READER = Caller(principal="reader", space="default", scopes=frozenset({"afi:read"}))
OTHER = Caller(principal="other", space="other")


def test_a_snapshot_shows_its_instant_and_outlives_later_writes(tmp_path: Path, store_url: str) -> None:
    provider = MemoryProvider(store_url, tmp_path / "files")
    provider.write(OWNER, "/facts/deploy.md", b"We deploy with a zebra canary")
    made = provider.snapshot_create(OWNER, "before-okapi")
    time.sleep(0.01)
    provider.write(OWNER, "/facts/deploy.md", b"We deploy blue-green with an okapi gate")
    provider.write(OWNER, "/facts/later.md", b"Written after the snapshot")
    assert [s.name for s in provider.snapshot_list(OWNER)] == ["before-okapi"]
    listed = provider.list(OWNER, "/.afi/at").entries
    assert [(e.path, e.type, e.mtime) for e in listed] == [("/.afi/at/before-okapi", "directory", made.at)]
    assert [e.path for e in provider.list(OWNER, "/.afi/at/before-okapi/facts").entries] == [
        "/.afi/at/before-okapi/facts/deploy.md"
    ]
    assert b"zebra" in provider.read(OWNER, "/.afi/at/before-okapi/facts/deploy.md").data
    found = provider.search(OWNER, SearchRequest.model_validate({"query": "zebra", "path": "/.afi/at/before-okapi"}))
    assert [m.path for m in found.matches] == ["/.afi/at/before-okapi/facts/deploy.md"]
    # another space has its own snapshots; a reader cannot take one
    assert provider.snapshot_list(OTHER) == [] and provider.list(OTHER, "/.afi/at").entries == []
    with pytest.raises(NotFound, match="no snapshot named"):
        provider.stat(OTHER, "/.afi/at/before-okapi")
    with pytest.raises(Forbidden):
        provider.snapshot_create(READER, "mine")
    # a taken name, a bad name, a bad instant: refused, nothing written
    with pytest.raises(Conflict, match="exists"):
        provider.snapshot_create(OWNER, "before-okapi")
    for bad in ("2026-11-30", "Before", "-x", "a/b", "a" * 65, ""):
        with pytest.raises(InvalidPath):
            provider.snapshot_create(OWNER, bad)
    with pytest.raises(InvalidPath, match="not an instant"):
        provider.snapshot_create(OWNER, "tuesday", at="next tuesday")
    with pytest.raises(InvalidPath, match="past instant"):
        provider.snapshot_create(OWNER, "later", at="2099-01-01")  # its view would keep changing
    assert [s.name for s in provider.snapshot_list(OWNER)] == ["before-okapi"]
    provider.snapshot_delete(OWNER, "before-okapi")
    assert provider.list(OWNER, "/.afi/at").entries == []
    assert b"okapi" in provider.read(OWNER, "/facts/deploy.md").data  # deleting a snapshot keeps every note
    with pytest.raises(NotFound):
        provider.snapshot_delete(OWNER, "before-okapi")


def test_snapshot_commands(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    assert afi("remember", "fact", "Deploys use a zebra canary", "--name", "deploy", db=db).returncode == 0
    made = afi("snapshot", "create", "monday", db=db)
    assert made.returncode == 0, made.stderr
    snapshot = json.loads(made.stdout)
    assert snapshot["name"] == "monday" and snapshot["path"] == "/.afi/at/monday/"
    old = afi("snapshot", "create", "launch", "--at", "2026-11-30T10:00:00Z", db=db)
    assert json.loads(old.stdout)["at"] == "2026-11-30T10:00:00.000Z"
    assert afi("snapshot", "list", db=db).stdout.splitlines() == [
        "launch\t2026-11-30T10:00:00.000Z",
        f"monday\t{snapshot['at']}",
    ]
    shown = afi("cat", "/.afi/at/monday/facts/deploy.md", db=db)
    assert shown.returncode == 0 and "zebra canary" in shown.stdout
    again = afi("snapshot", "create", "monday", db=db)
    assert again.returncode == 2 and "conflict" in again.stderr
    assert afi("snapshot", "delete", "launch", db=db).returncode == 0
    gone = afi("snapshot", "delete", "launch", db=db)
    assert gone.returncode == 2 and "not_found" in gone.stderr
    assert [line.split("\t")[0] for line in afi("snapshot", "list", db=db).stdout.splitlines()] == ["monday"]
