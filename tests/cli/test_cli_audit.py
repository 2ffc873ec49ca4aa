"""``afi audit list | prune`` through the real console script, on a store written by the provider."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from afi.errors import Forbidden
from afi.model import rfc3339
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from tests.support.cli import afi

READER = Caller(principal="reader", space="default", scopes=frozenset({"afi:read"}))


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A store with three audited writes (one refused), the oldest of them 40 days old."""
    path = tmp_path / "afi.db"
    provider = MemoryProvider(path, tmp_path / "files")
    owner = provider.authenticate(None)
    provider.write(owner, "/files/old.txt", b"old")
    provider.write(owner, "/files/new.txt", b"new")
    with pytest.raises(Forbidden):
        provider.write(READER, "/files/nope.txt", b"no")
    with sqlite3.connect(path) as conn:
        aged = rfc3339(datetime.now(UTC) - timedelta(days=40))
        conn.execute("UPDATE audit SET at = ? WHERE path = '/files/old.txt'", (aged,))
    return path


def test_list_shows_recent_writes_newest_first(db: Path) -> None:
    run = afi("audit", "list", "--limit", "10", db=db)
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stdout.splitlines() if "/files/" in line]
    assert ["nope.txt" in lines[0], "new.txt" in lines[1], "old.txt" in lines[2]] == [True, True, True]
    assert "forbidden" in lines[0] and "reader" in lines[0] and "ok" in lines[1]


def test_prune_drops_only_rows_older_than_asked(db: Path) -> None:
    run = afi("audit", "prune", "--older-than", "30", db=db)
    assert run.returncode == 0, run.stderr
    assert "pruned 1 audit rows older than 30 days" in run.stderr
    listed = afi("audit", "list", db=db).stdout
    assert "old.txt" not in listed and "new.txt" in listed and "nope.txt" in listed
    again = afi("audit", "prune", "--older-than", "30", db=db)
    assert "pruned 0 audit rows" in again.stderr


@pytest.mark.parametrize("args", [("prune",), ("prune", "--older-than", "-1"), ("prune", "--older-than", "soon")])
def test_prune_refuses_a_missing_or_bad_age_and_deletes_nothing(db: Path, args: tuple[str, ...]) -> None:
    run = afi("audit", *args, db=db)
    assert run.returncode == 2
    assert "older-than" in run.stderr
    assert afi("audit", "list", db=db).stdout.count("/files/") == 3


def test_the_cli_writes_are_locked_and_audited_like_any_door(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    remembered = afi("remember", "fact", "User prefers metric units", "--name", "units", db=db)
    assert remembered.returncode == 0, remembered.stderr
    note_id = next(line.split(": ", 1)[1] for line in remembered.stdout.splitlines() if line.startswith("id: "))
    assert afi("remember", "working", "drafting the plan", "--block", "core", db=db).returncode == 0
    assert afi("forget", "--block", "core", db=db).returncode == 0
    assert afi("forget", "--id", note_id, db=db).returncode == 0
    appended = afi("session", "append", "s1", "We roll out with a canary", "--id", "m1", db=db)
    assert appended.returncode == 0, appended.stderr
    refused = afi("remember", "fact", "x", "--path", "../outside.txt", db=db)
    assert refused.returncode == 2 and "invalid_path" in refused.stderr
    rows = [(row["principal"], row["verb"], row["path"], row["result"]) for row in AuditLogReader(db).rows()]
    assert rows == [
        ("local", "remember", "/facts/units.md", "ok"),
        ("local", "remember", "/working/core.md", "ok"),
        ("local", "forget", "/working/core.md", "ok"),
        ("local", "forget", f"/history/{note_id}.md", "ok"),
        ("local", "ledger.append", "/sessions/s1.md", "ok"),
        ("local", "remember", "/files/../outside.txt", "invalid_path"),
    ]


class AuditLogReader:
    """The audit table as the CLI left it, oldest first."""

    def __init__(self, db: Path) -> None:
        self.db = db

    def rows(self) -> list[sqlite3.Row]:
        with sqlite3.connect(self.db) as conn:
            conn.row_factory = sqlite3.Row
            return list(conn.execute("SELECT principal, verb, path, result FROM audit ORDER BY seq"))
