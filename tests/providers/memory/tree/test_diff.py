"""``afi diff A B``: the notes added, changed and retired between two instants or snapshots, on each engine."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import pytest

from afi.errors import InvalidPath, NotFound
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from tests.support.cli import afi

OWNER = Caller(principal="local", space="default")


def _instant() -> str:
    time.sleep(0.01)
    moment = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    time.sleep(0.01)
    return moment


def test_a_diff_names_what_was_added_changed_and_retired(tmp_path: Path, store_url: str) -> None:
    provider = MemoryProvider(store_url, tmp_path / "files")
    provider.write(OWNER, "/facts/deploy.md", b"We deploy with a zebra canary")
    erased = provider.remember(OWNER, kind="fact", name="secret", content="A secret to forget")
    held = provider.remember(OWNER, kind="fact", name="audit-trail", content="Kept for the auditors")
    ends = datetime.fromtimestamp(time.time() + 0.3, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    provider.remember(OWNER, kind="procedure", name="freeze", content="Code freeze this week", valid_to=ends)
    provider.write(OWNER, "/facts/same.md", b"Nothing changes here")
    provider.snapshot_create(OWNER, "monday")
    time.sleep(0.01)
    provider.write(OWNER, "/facts/deploy.md", b"We deploy blue-green with an okapi gate")
    provider.write(OWNER, "/facts/oncall.md", b"The oncall rota lives in the heron sheet")
    provider.forget(OWNER, id=erased.id)  # erased: gone from every instant, so from every diff
    provider.forget(OWNER, id=held.id, hold=True)  # under legal hold: kept for the auditors, not in any instant
    time.sleep(0.4)  # the freeze expires
    tuesday = _instant()
    found = provider.diff(OWNER, "monday", tuesday)
    assert [c.path for c in found.added] == ["/facts/oncall.md"]
    assert [c.path for c in found.changed] == ["/facts/deploy.md"]
    assert found.changed[0].before != found.changed[0].after
    assert [c.path for c in found.retired] == ["/procedures/freeze.md"]
    assert all(c.after is None and c.before for c in found.retired)
    back = provider.diff(OWNER, tuesday, "monday")  # the other way round
    assert [c.path for c in back.retired] == ["/facts/oncall.md"]
    assert [c.path for c in back.added] == ["/procedures/freeze.md"]
    assert asdict(provider.diff(OWNER, "now", "now")) | {"since": "", "until": ""} == {
        "since": "",
        "until": "",
        "added": [],
        "changed": [],
        "retired": [],
        "files": {"added": [], "changed": [], "deleted": []},
    }
    with pytest.raises(NotFound, match="no snapshot named"):
        provider.diff(OWNER, "sunday", "now")
    with pytest.raises(InvalidPath, match="not an instant"):
        provider.diff(OWNER, "2026-99-99", "now")


def test_afi_diff_prints_one_line_a_note_and_json(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    afi("remember", "fact", "We deploy with a zebra canary", "--name", "deploy", db=db)
    assert afi("snapshot", "create", "monday", db=db).returncode == 0
    time.sleep(0.01)
    afi("remember", "fact", "The oncall rota lives in the heron sheet", "--name", "oncall", db=db)
    afi("remember", "fact", "We deploy blue-green with an okapi gate", "--name", "deploy", db=db)
    text = afi("diff", "monday", "now", db=db)
    assert text.returncode == 1, text.stderr  # as diff(1): 1 when something changed
    lines = text.stdout.splitlines()
    assert lines[0].startswith("notes from ") and [line.split()[:2] for line in lines[1:]] == [
        ["+", "/facts/oncall.md"],
        ["~", "/facts/deploy.md"],
    ]
    body = json.loads(afi("diff", "monday", "--json", db=db).stdout)
    assert [c["path"] for c in body["added"]] == ["/facts/oncall.md"] and body["retired"] == []
    same = afi("diff", "now", "now", db=db)
    assert same.returncode == 0 and same.stderr == ""  # as diff(1): 0 when nothing changed
    bad = afi("diff", "sunday", db=db)
    assert bad.returncode == 2 and "no snapshot named 'sunday'" in " ".join(bad.stderr.split())
