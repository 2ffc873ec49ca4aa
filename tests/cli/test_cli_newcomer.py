"""What a new user meets first, run as a user runs it (the real ``afi`` console script in a subprocess):
``--version`` and ``-h``, ``token list`` into a pipe, ``token ssh add`` of a missing file, ``serve``
on a busy port, ``ls``/``cat``, a ``--db`` URL of an engine afi does not speak, and the package's license.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.core import TyperGroup
from typer.testing import CliRunner

from afi.auth.keys import KeyStore
from afi.cli import _register_all, app
from tests.support import warm
from tests.support.cli import AFI, afi
from tests.support.ssh import add_key, keygen

ROOT = Path(__file__).resolve().parents[2]


def test_version_prints_the_installed_version(tmp_path: Path) -> None:
    for flag in ("--version", "-V"):
        result = afi(flag, db=tmp_path / "afi.db", cold=True)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"afi-memory {metadata.version('afi-memory')}"


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [prefix]
    for name, command in group.commands.items():
        if isinstance(command, TyperGroup):
            found += _commands(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


@pytest.mark.slow
def test_dash_h_is_help_on_every_command(tmp_path: Path) -> None:
    assert afi("-h", db=tmp_path / "afi.db").stdout == afi("--help", db=tmp_path / "afi.db").stdout
    shown = afi("token", "ssh", "add", "-h", db=tmp_path / "afi.db")
    assert shown.returncode == 0 and "Usage: afi token ssh add" in shown.stdout
    _register_all()
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    commands = _commands(root)
    assert ("ls",) in commands and ("token", "ssh", "add") in commands
    runner = CliRunner()
    for words in commands:
        result = runner.invoke(app, [*words, "-h"], prog_name="afi")
        assert result.exit_code == 0, (words, result.output)
        assert f"Usage: {' '.join(['afi', *words])}" in result.output, words


def test_token_list_into_a_pipe_is_whole_tab_separated_rows(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    keys = KeyStore(db)
    long_name = "a rather long label that a narrow table would have cut or folded"
    record, _ = keys.create(space="a-space-with-a-long-name", scopes=("afi:read", "afi:write"), name=long_name)
    keys.close()
    result = afi("token", "list", db=db, env={"COLUMNS": "40"})
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert rows == [[record.id, long_name, "a-space-with-a-long-name", "afi:read afi:write", record.created_at, ""]]


def test_token_ssh_list_into_a_pipe_is_whole_tab_separated_rows(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    key = keygen(tmp_path, "laptop-of-someone-with-a-long-name")
    key_id = add_key(db, key.with_suffix(".pub"), space="a-space-with-a-long-name", scopes=("afi:read", "afi:write"))
    result = afi("token", "ssh", "list", db=db, env={"COLUMNS": "40"})
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert len(rows) == 1 and rows[0][0] == key_id and rows[0][1].startswith("SHA256:"), rows
    assert rows[0][3:5] == ["a-space-with-a-long-name", "afi:read afi:write"]


def test_token_ssh_add_of_a_missing_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "id_ed25519.pub"
    result = afi("token", "ssh", "add", str(missing), db=tmp_path / "afi.db")
    assert result.returncode == 2
    assert result.stderr.strip() == f"afi: {missing}: invalid_path: no such public key file"
    folder = afi("token", "ssh", "add", str(tmp_path), db=tmp_path / "afi.db")
    assert folder.returncode == 2 and "Traceback" not in folder.stderr and len(folder.stderr.splitlines()) == 1


def test_serve_on_a_busy_port_says_so_and_exits_non_zero(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for extra in ([], ["--workers", "2"]):
            result = afi("serve", "--host", "127.0.0.1", "--port", str(port), *extra, db=tmp_path / "afi.db")
            assert result.returncode != 0, extra
            said = f"port {port} on 127.0.0.1 is in use (another afi serve?): pick another with --port"
            assert said in result.stderr and "Errno" not in result.stderr, (extra, result.stderr)


def test_ls_and_cat_look_at_the_tree(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    assert afi("remember", "fact", "The user drinks coffee.", "--name", "coffee", db=db).returncode == 0
    listed = afi("ls", db=db)
    assert listed.returncode == 0, listed.stderr
    assert {"facts/", "files/", "working/"} <= set(listed.stdout.split())
    assert afi("ls", "/facts", db=db).stdout == "coffee.md\n"
    long = afi("ls", "-l", "/facts", db=db).stdout.split()
    read = afi("cat", "/facts/coffee.md", db=db)
    assert read.returncode == 0 and "The user drinks coffee." in read.stdout and "kind: fact" in read.stdout
    assert long[0] == "-" and int(long[1]) == len(read.stdout.encode()) and long[-1] == "coffee.md"
    (tmp_path / "files" / "default").mkdir(parents=True, exist_ok=True)
    (tmp_path / "files" / "default" / "raw.bin").write_bytes(b"\x00\xffbytes\n")
    assert afi("ls", "/files/raw.bin", db=db).stdout == "/files/raw.bin\n"
    env = {"AFI_DB": str(db), "AFI_ROOT": str(tmp_path / "files"), "PATH": "/usr/bin:/bin"}
    raw = warm.run([str(AFI), "cat", "/files/raw.bin"], capture_output=True, env=env, timeout=60, check=False)
    assert raw.returncode == 0 and raw.stdout == b"\x00\xffbytes\n"
    missing = afi("cat", "/facts/never.md", db=db)
    assert missing.returncode == 2 and missing.stderr.startswith("afi: /facts/never.md: not_found:")
    folder = afi("cat", "/facts", db=db)
    assert folder.returncode == 2 and "invalid_path" in folder.stderr


def test_a_db_url_of_another_engine_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "AFI_ROOT": str(tmp_path / "files"), "COLUMNS": "200"}
    env.pop("AFI_DB", None)
    for url in ("mysql://user:secret@db.example/memory", "mongodb://localhost/afi"):
        result = warm.run(
            [str(AFI), "recall", "coffee", "--db", url], capture_output=True, text=True, env=env, cwd=work, timeout=60
        )
        assert result.returncode == 2, result.stderr
        scheme = url.split(":")[0]
        assert f"{scheme}:// is not a store afi can open" in result.stderr
        assert "SQLite" in result.stderr and "PostgreSQL" in result.stderr
    assert list(work.iterdir()) == []
    ok = warm.run(
        [str(AFI), "remember", "fact", "The user drinks tea.", "--db", "sqlite:///store.db"],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert "store.db" in {p.name for p in work.iterdir()} and not (work / "sqlite:").exists()


def test_the_license_is_an_spdx_string() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["license"] == "Apache-2.0"
    requires = project["build-system"]["requires"]
    assert any(r.replace(" ", "").startswith("setuptools>=") and int(r.split(">=")[1]) >= 77 for r in requires)


def test_shell_completion_is_offered_for_bash(tmp_path: Path) -> None:
    shown = afi("--show-completion", "bash", db=tmp_path / "afi.db")
    assert shown.returncode == 0, shown.stderr
    assert "_afi_completion" in shown.stdout and "complete " in shown.stdout
    completed = afi(
        "re", db=tmp_path / "afi.db", env={"_AFI_COMPLETE": "complete_bash", "COMP_WORDS": "afi re", "COMP_CWORD": "1"}
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["remember", "recall"]


# Run by a process whose parent has exited, so that nothing above afi but PID 1 (or a subreaper) is
# a shell: as from cron, a service or a detached job, where shell detection has nothing to find.
_ORPHANED = """
import json, os, subprocess, sys
if os.fork():
    os._exit(0)
os.setsid()
runs = [subprocess.run(argv, capture_output=True, text=True, timeout=60) for argv in json.loads(sys.argv[2])]
with open(sys.argv[1] + ".part", "w") as out:
    json.dump([[run.returncode, run.stdout, run.stderr] for run in runs], out)
os.rename(sys.argv[1] + ".part", sys.argv[1])
"""


def _run_orphaned(tmp_path: Path, *argvs: list[str]) -> list[tuple[int, str, str]]:
    answer = tmp_path / "orphaned.json"
    launcher = subprocess.run(
        [sys.executable, "-c", _ORPHANED, str(answer), json.dumps(argvs)], timeout=60, check=False
    )
    assert launcher.returncode == 0
    deadline = time.monotonic() + 60
    while not answer.exists():
        assert time.monotonic() < deadline, "the orphaned runs did not finish in 60 s"
        time.sleep(0.05)
    return [tuple(run) for run in json.loads(answer.read_text())]  # type: ignore[misc]


def test_shell_completion_names_its_shell_when_no_shell_started_afi(tmp_path: Path) -> None:
    named, bare, unknown = _run_orphaned(
        tmp_path,
        [str(AFI), "--show-completion", "bash"],
        [str(AFI), "--show-completion"],
        [str(AFI), "--show-completion", "tcsh"],
    )
    assert named[0] == 0 and "complete -o default -F _afi_completion afi" in named[1], named
    assert bare[0] == 2 and bare[1] == "", bare
    assert "no shell afi completes" in bare[2] and "--show-completion bash" in bare[2], bare
    assert unknown[0] == 2 and "'tcsh' is not a shell afi completes" in unknown[2], unknown
