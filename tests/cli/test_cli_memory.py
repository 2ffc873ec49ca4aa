"""``afi remember | recall | forget`` through the real console script, on a real SQLite file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.cli import afi


def field(output: str, key: str) -> str:
    match = re.search(rf"^{key}: (.*)$", output, re.MULTILINE)
    assert match, f"no {key!r} line in {output!r}"
    return match.group(1)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "afi.db"


def test_remember_recall_forget_round_trip(db: Path, tmp_path: Path) -> None:
    made = afi("remember", "fact", "User prefers metric units", "--tag", "prefs", "--importance", "0.8", db=db)
    assert made.returncode == 0, made.stderr
    note_id = field(made.stdout, "id")
    assert re.fullmatch(r"[0-9a-f]{20}", note_id)
    assert field(made.stdout, "kind") == "fact"
    assert field(made.stdout, "supersedes") == "-"
    assert db.exists()

    changed = afi("remember", "fact", "User prefers metric units, Celsius", db=db)
    assert changed.returncode == 0, changed.stderr
    assert field(changed.stdout, "supersedes") == note_id
    new_id = field(changed.stdout, "id")

    table = afi("recall", "preferred units celsius", db=db)
    assert table.returncode == 0, table.stderr
    columns = ("id", "kind", "score", "similarity", "recency", "importance", "dated", "adjacent", "link", "valid")
    for column in (*columns, "content"):
        assert column in table.stdout
    assert new_id in table.stdout and "User prefers metric units, Celsius" in table.stdout

    as_json = afi("recall", "preferred units", "--json", "--top-k", "5", db=db)
    body = json.loads(as_json.stdout)
    assert [h["id"] for h in body["hits"]] == [new_id]
    assert body["explain"][0]["id"] == new_id

    gone = afi("forget", "--id", new_id, db=db)
    assert gone.returncode == 0, gone.stderr
    assert field(gone.stdout, "deleted") == "1"
    after = json.loads(afi("recall", "preferred units", "--json", db=db).stdout)
    assert new_id not in [h["id"] for h in after["hits"]]


def test_db_option_beats_the_environment(db: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    made = afi("remember", "fact", "Deploys happen on Tuesdays", "--db", str(other), db=db)
    assert made.returncode == 0, made.stderr
    assert other.exists()
    assert json.loads(afi("recall", "deploys tuesdays", "--json", db=db).stdout)["hits"] == []
    hits = json.loads(afi("recall", "deploys tuesdays", "--json", "--db", str(other), db=db).stdout)["hits"]
    assert len(hits) == 1


def test_spaces_are_separate(db: Path) -> None:
    assert afi("remember", "fact", "Alpha space secret", "--space", "alpha", db=db).returncode == 0
    assert json.loads(afi("recall", "alpha secret", "--json", "--space", "beta", db=db).stdout)["hits"] == []
    assert len(json.loads(afi("recall", "alpha secret", "--json", "--space", "alpha", db=db).stdout)["hits"]) == 1


def test_working_block_and_kinds(db: Path) -> None:
    made = afi("remember", "working", "Prefers terse output", "--block", "core", db=db)
    assert made.returncode == 0, made.stderr
    assert field(made.stdout, "block") == "core"
    proc = afi("remember", "procedure", "Deploy via canary first", db=db)
    assert proc.returncode == 0
    assert json.loads(afi("recall", "canary deploy", "--json", db=db).stdout)["hits"] == []
    kinds = json.loads(afi("recall", "canary deploy", "--json", "--kind", "procedure", db=db).stdout)
    assert [h["kind"] for h in kinds["hits"]] == ["procedure"]
    cleared = afi("forget", "--block", "core", db=db)
    assert cleared.returncode == 0, cleared.stderr


@pytest.mark.parametrize(
    ("args", "code"),
    [
        pytest.param(["remember", "fact", "x", "--importance", "2"], "invalid_path", id="importance-out-of-range"),
        pytest.param(["remember", "gossip", "x"], "invalid_path", id="unknown-kind"),
        pytest.param(["remember", "file", "x", "--path", "../etc/passwd"], "invalid_path", id="path-leaves-jail"),
        pytest.param(["recall", "x", "--kind", "nope"], "invalid_path", id="recall-unknown-kind"),
        pytest.param(["forget"], "invalid_path", id="forget-without-target"),
        pytest.param(["forget", "--id", "abc", "--block", "core"], "invalid_path", id="forget-two-targets"),
    ],
)
def test_refusals_exit_2_with_one_error_line_and_write_nothing(
    db: Path, tmp_path: Path, args: list[str], code: str
) -> None:
    result = afi(*args, db=db, env={"AFI_ROOT": str(tmp_path / "files")})
    assert result.returncode == 2
    assert result.stdout == ""
    line = result.stderr.strip()
    assert line.startswith("afi: ") and f"{code}: " in line and "\n" not in line
    assert json.loads(afi("recall", "x", "--json", db=db).stdout)["hits"] == []


def test_every_command_has_help(db: Path) -> None:
    for command in ("remember", "recall", "forget"):
        result = afi(command, "--help", db=db)
        assert result.returncode == 0
        assert "Usage" in result.stdout and "--db" in result.stdout and "--space" in result.stdout
    top = afi("--help", db=db)
    for command in ("remember", "recall", "forget"):
        assert command in top.stdout


def test_recall_shows_every_signal_and_leaves_out_what_does_not_match(db: Path) -> None:
    for text in ("The deploy uses a canary in eu-west first", "Alice prefers tea over coffee",
                 "The office closes at six on Fridays"):  # fmt: skip
        assert afi("remember", "fact", text, db=db).returncode == 0
    body = json.loads(afi("recall", "how do we deploy", "--json", db=db).stdout)
    assert [h["content"] for h in body["hits"]] == ["The deploy uses a canary in eu-west first"]
    why = body["explain"][0]
    assert all(isinstance(why[key], float) for key in ("similarity", "recency", "importance"))
    table = afi("recall", "how do we deploy", db=db).stdout
    row = next(line for line in table.splitlines() if "canary" in line)
    assert "-" not in row.replace("eu-west", "").split("│")[3:6], row  # similarity, recency, importance
    every = json.loads(afi("recall", "how do we deploy", "--json", "--threshold", "0", db=db).stdout)
    assert len(every["hits"]) == 3
    refused = afi("recall", "x", "--threshold", "1.5", db=db)
    assert refused.returncode == 2 and "threshold" in refused.stderr


def test_remember_says_how_a_nameless_note_is_named(db: Path) -> None:
    made = afi("remember", "fact", "Deploys happen on Tuesdays", db=db)
    assert field(made.stdout, "name") == field(made.stdout, "id")
    assert "(default: its id)" in " ".join(afi("remember", "--help", db=db).stdout.split())
