"""The audit log on both engines: rows recorded, read newest first, pruned by age; ``afi audit list|prune``."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from afi.auth.audit import AuditLog
from afi.cli import _register_all, app
from afi.model import rfc3339
from afi.provider import Caller
from afi.storage.database import open_database

ALICE = Caller("alice", "team-a")
BOB = Caller("bob", "default")


@pytest.fixture
def log(store_url: str) -> AuditLog:
    return AuditLog(open_database(store_url))


def _age(store_url: str, path: str, days: int) -> None:
    """Move the row of ``path`` ``days`` into the past."""
    with open_database(store_url).transaction() as conn:
        conn.execute(
            "UPDATE audit SET at = ? WHERE path = ?", (rfc3339(datetime.now(UTC) - timedelta(days=days)), path)
        )


def test_rows_are_read_newest_first_and_limited(log: AuditLog) -> None:
    log.record(ALICE, "write", "/files/a.txt", "ok")
    log.record(BOB, "delete", "/files/b.txt", "forbidden")
    log.record(ALICE, "move", "/files/c.txt", "ok")
    rows = log.recent()
    assert [(r["principal"], r["space"], r["verb"], r["path"], r["result"]) for r in rows] == [
        ("alice", "team-a", "move", "/files/c.txt", "ok"),
        ("bob", "default", "delete", "/files/b.txt", "forbidden"),
        ("alice", "team-a", "write", "/files/a.txt", "ok"),
    ]
    assert all(r["at"].endswith("Z") for r in rows)
    assert [r["path"] for r in log.recent(limit=2)] == ["/files/c.txt", "/files/b.txt"]


def test_a_path_is_kept_as_sent_even_a_lone_surrogate(log: AuditLog) -> None:
    log.record(ALICE, "write", "/files/caf\u00e9 \ud800.txt", "ok")
    (row,) = log.recent()
    assert row["path"] == "/files/caf\u00e9 \\ud800.txt"


def test_prune_drops_only_rows_older_than_the_age(log: AuditLog, store_url: str) -> None:
    for name in ("old", "older", "new"):
        log.record(ALICE, "write", f"/files/{name}.txt", "ok")
    _age(store_url, "/files/old.txt", 40)
    _age(store_url, "/files/older.txt", 400)
    assert log.prune(timedelta(days=30)) == 2
    assert [r["path"] for r in log.recent()] == ["/files/new.txt"]
    assert log.prune(timedelta(days=30)) == 0
    assert log.prune(timedelta(0), now=datetime.now(UTC) + timedelta(seconds=1)) == 1
    with pytest.raises(ValueError, match="negative"):
        log.prune(timedelta(days=-1))


def test_threads_record_at_once_and_every_row_lands(log: AuditLog) -> None:
    """5 threads record 20 rows each at once (100 rows): every row lands, in order within each thread."""
    failures: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(20):
                log.record(Caller(f"t{n}"), "write", f"/files/{i}.txt", "ok")
        except BaseException as err:
            failures.append(err)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    rows = log.recent(limit=1000)
    assert len(rows) == 100
    for n in range(5):
        mine = [r["path"] for r in reversed(rows) if r["principal"] == f"t{n}"]
        assert mine == [f"/files/{i}.txt" for i in range(20)]


def test_afi_audit_list_and_prune(log: AuditLog, store_url: str) -> None:
    log.record(ALICE, "write", "/files/kept.txt", "ok")
    log.record(BOB, "write", "/files/aged.txt", "ok")
    _age(store_url, "/files/aged.txt", 10)
    _register_all()
    runner = CliRunner()
    listed = runner.invoke(app, ["audit", "list", "--db", store_url])
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    assert len(lines) == 2 and lines[0].endswith("/files/aged.txt") and "  alice  team-a  write  ok  " in lines[1]
    pruned = runner.invoke(app, ["audit", "prune", "--older-than", "5", "--db", store_url])
    assert pruned.exit_code == 0 and "pruned 1 audit rows" in pruned.stderr
    assert [r["path"] for r in log.recent()] == ["/files/kept.txt"]
