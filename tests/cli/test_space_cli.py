"""``afi space fork | restore | list`` through the real console script, on a real SQLite file."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from tests.support.cli import afi


@pytest.mark.slow
def test_fork_restore_and_list_from_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    assert afi("remember", "fact", "We deploy with a zebra canary", "--name", "deploy", db=db).returncode == 0
    assert afi("snapshot", "create", "monday", db=db).returncode == 0
    time.sleep(0.01)
    afi("remember", "fact", "We deploy blue-green with an okapi gate", "--name", "deploy", db=db)
    afi("remember", "fact", "The oncall rota lives in the ibis sheet", "--name", "oncall", db=db)

    forked = afi("space", "fork", "default@monday", "copy", db=db)
    assert forked.returncode == 0, forked.stderr
    assert forked.stdout.startswith("forked default@") and "into copy: 1 note versions" in forked.stdout
    assert "fork notes" in forked.stderr  # the progress bar, on stderr
    again = afi("space", "fork", "default@monday", "copy", db=db)
    assert again.returncode == 2 and "'copy' is not empty" in " ".join(again.stderr.split())
    bad = afi("space", "fork", "default@sunday", "other", db=db)
    assert bad.returncode == 2 and "no snapshot named 'sunday'" in " ".join(bad.stderr.split())

    rows = json.loads(afi("space", "list", "--json", db=db).stdout)
    assert [(r["space"], r["notes"], r["versions"]) for r in rows] == [("copy", 1, 1), ("default", 2, 3)]
    table = afi("space", "list", db=db).stdout.splitlines()
    assert (
        table[0].split("\t") == ["space", "notes", "versions", "files", "sessions", "last synced"] and len(table) == 3
    )
    assert table[1].endswith("\t-")  # never synced

    dry = afi("space", "restore", "default@monday", "--dry-run", db=db)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[1:] == ["~ /facts/deploy.md", "- /facts/oncall.md"]
    assert afi("diff", "monday", "now", db=db).returncode == 1  # the dry run changed nothing: still differs
    done = afi("space", "restore", "default@monday", "--json", db=db)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changed"] == ["/facts/deploy.md"]
    assert afi("diff", "monday", "now", db=db).returncode == 0  # now says what monday said
    assert "changed nothing" in afi("space", "restore", "default@monday", db=db).stdout
    missing = afi("space", "restore", "default", db=db)
    assert missing.returncode == 2 and "name the instant" in " ".join(missing.stderr.split())

    provider = MemoryProvider(db, tmp_path / "files")
    copy = Caller(principal="local", space="copy")
    assert b"zebra canary" in provider.read(copy, "/facts/deploy.md").data
    default = Caller(principal="local", space="default")
    assert b"zebra canary" in provider.read(default, "/facts/deploy.md").data
    audit = [(r["space"], r["verb"], r["result"]) for r in provider.audit_log(limit=20)]
    assert ("copy", "fork", "ok") in audit and ("default", "restore", "ok") in audit
