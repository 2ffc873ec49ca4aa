"""``afi session …`` and ``afi search`` as a user runs them (typer's runner, a real store file)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from afi.cli import _register_all, app

_register_all()
runner = CliRunner()


def _afi(db: Path, *args: str) -> tuple[int, str]:
    extra = ["--root", str(db.parent / "files")] if args[:1] == ("session",) and args[1] not in ("show", "list") else []
    result = runner.invoke(app, [*args, "--db", str(db), *extra])
    return result.exit_code, result.output


@pytest.mark.parametrize(
    "command",
    [
        ["session", c]
        for c in ("append", "observe", "reflect", "open-scope", "close-scope", "promote", "bind", "show", "list")
    ]
    + [["search"]],
    ids=lambda c: " ".join(c),
)
def test_every_command_has_help(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0 and "Usage" in result.output


def test_a_session_from_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    assert _afi(db, "session", "append", "s1", "We roll out with a canary", "--id", "m1")[0] == 0
    assert _afi(db, "session", "append", "s1", "Canary then fleet", "--id", "m2", "--role", "assistant")[0] == 0
    code, out = _afi(db, "session", "observe", "s1", "Deploys via canary", "--source", "m1")
    obs = json.loads(out)["observation"]["id"]
    code, out = _afi(db, "session", "open-scope", "s1", "deploy")
    scope = json.loads(out)["scope"]["id"]
    code, out = _afi(db, "session", "reflect", "s1", "Canary first", "--observation", obs, "--scope", scope)
    assert code == 0 and json.loads(out)["reflection"]["scope_id"] == scope
    assert json.loads(_afi(db, "session", "close-scope", "s1", scope)[1])["scope"]["closed_at"]
    code, out = _afi(db, "session", "show", "s1")
    assert code == 0 and "[m2]" in out and f"scope {scope} closed" in out
    assert _afi(db, "session", "list")[1].split() == ["s1"]
    code, out = _afi(db, "search", "canary fleet", "--conversation", "s1", "--root", str(tmp_path / "files"))
    assert (
        code == 0 and out.splitlines()[0] == "/sessions/s1.md:4:[1.000] [m2] " + out.splitlines()[0].split("[m2] ")[1]
    )
    code, out = _afi(db, "search", "canary", "--path", "/sessions", "--json", "--root", str(tmp_path / "files"))
    assert code == 0 and {m["line"] for m in json.loads(out)["matches"]} == {3, 5}


def test_a_reflection_of_a_closed_scope_is_promoted_to_a_procedure(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    _afi(db, "session", "append", "s1", "We roll out with a canary", "--id", "m1")
    obs = json.loads(_afi(db, "session", "observe", "s1", "Deploys via canary", "--source", "m1")[1])["observation"]
    scope = json.loads(_afi(db, "session", "open-scope", "s1", "deploy")[1])["scope"]["id"]
    out = _afi(db, "session", "reflect", "s1", "Canary first, then the fleet", "--observation", obs["id"],
               "--scope", scope)[1]  # fmt: skip
    reflection = json.loads(out)["reflection"]["id"]
    code, out = _afi(db, "session", "promote", reflection, "--kind", "procedure", "--name", "deploy")
    assert code == 2 and "not bound to a closed work scope" in out  # the scope is still open
    _afi(db, "session", "close-scope", "s1", scope)
    code, out = _afi(db, "session", "promote", reflection, "--kind", "procedure", "--name", "deploy")
    note = json.loads(out)
    assert code == 0 and note["kind"] == "procedure" and note["content"] == "Canary first, then the fleet"
    assert note["promoted_from"] == {"reflection_id": reflection, "scope_id": scope}
    code, out = _afi(db, "search", "then the fleet", "--path", "/procedures", "--root", str(tmp_path / "files"))
    assert code == 0 and out.startswith("/procedures/deploy.md:")
    code, out = _afi(db, "session", "promote", "0" * 12)
    assert code == 2 and "not_found" in out
    code, out = _afi(db, "session", "promote", reflection, "--kind", "episode")
    assert code == 2 and "fact or a procedure" in out


def test_refusals_are_one_line_and_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    _afi(db, "session", "append", "s1", "hello", "--id", "m1")
    code, out = _afi(db, "session", "append", "s1", "changed", "--id", "m1")
    assert code == 2 and "conflict" in out
    code, out = _afi(db, "session", "append", "s1", "x", "--id", "m2", "--role", "robot")
    assert code == 2 and "invalid_path" in out
    assert "[m2]" not in _afi(db, "session", "show", "s1")[1]
    code, out = _afi(db, "session", "show", "nope")
    assert code == 2 and "not_found" in out
    code, out = _afi(db, "search", "x", "--regex", "--semantic", "--root", str(tmp_path / "files"))
    assert code == 2 and "choose one" in out


def test_search_prints_greps_layout_and_exits_1_on_no_match(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    root = str(tmp_path / "files")
    code, _ = _afi(db, "remember", "fact", "User prefers metric units", "--name", "units", "--root", root)
    assert code == 0
    code, out = _afi(db, "search", "metric", "--path", "/facts", "--root", root)
    assert code == 0 and out.strip().splitlines() == ["/facts/units.md:10:User prefers metric units"]
    code, out = _afi(db, "search", "zebra-never-said", "--root", root)
    assert code == 1 and out.strip() == ""
