"""``afi serve``, ``afi token`` and ``afi conformance``, run as a user runs them (subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import AfiServer

from afi.commands.serve import is_loopback
from afi.providers.memory.keys import KeyStore


def afi(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", "from afi.cli import main; main()", *args]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.10", False),
        ("example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_serve_refuses_a_public_address_without_keys(tmp_path: Path, host: str) -> None:
    result = afi("serve", "--host", host, "--port", "0", "--db", str(tmp_path / "afi.db"), "--root", str(tmp_path))
    assert result.returncode == 2
    assert "refusing to listen" in result.stderr and "afi token create" in result.stderr


def test_serve_announces_where_it_listens(open_server: AfiServer) -> None:
    assert open_server.url.startswith("http://127.0.0.1:")
    assert not open_server.url.endswith(":0")


def test_token_create_list_revoke(tmp_path: Path) -> None:
    db = str(tmp_path / "afi.db")
    created = afi(
        "token", "create", "--scope", "afi:read", "--scope", "afi:write", "--space", "team", "--name", "ci", "--db", db
    )
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("afi_") and "\n" not in token
    (record,) = KeyStore(db).list()
    assert KeyStore(db).verify(token) is not None
    assert record.id in created.stderr and "shown only now" in created.stderr
    listed = afi("token", "list", "--db", db)
    assert listed.returncode == 0
    assert record.id in listed.stdout and "team" in listed.stdout and "ci" in listed.stdout
    assert token not in listed.stdout and token[4:20] not in listed.stdout
    assert afi("token", "revoke", record.id, "--db", db).returncode == 0
    assert KeyStore(db).verify(token) is None
    again = afi("token", "revoke", record.id, "--db", db)
    assert again.returncode == 2 and "not_found" in again.stderr


def test_token_create_refuses_an_unknown_scope(tmp_path: Path) -> None:
    db = str(tmp_path / "afi.db")
    result = afi("token", "create", "--scope", "afi:root", "--db", db)
    assert result.returncode == 2
    assert "invalid_path" in result.stderr and "unknown scope 'afi:root'" in result.stderr
    assert result.stdout == ""
    assert KeyStore(db).count() == 0


def test_conformance_command_passes_with_a_json_report(afi_server: AfiServer) -> None:
    result = afi(
        "conformance",
        afi_server.url,
        "--token",
        afi_server.tokens["writer"],
        "--other-token",
        afi_server.tokens["other"],
        "--json",
    )
    assert result.returncode == 0, result.stdout[-3000:]
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["totals"]["fail"] == 0 and report["totals"]["pass"] >= 70


def test_conformance_command_exits_1_on_failure(afi_server: AfiServer) -> None:
    result = afi("conformance", afi_server.url, "--token", afi_server.tokens["reader"], "--only", "write.create")
    assert result.returncode == 1
    assert "fail" in result.stdout and "forbidden" in result.stdout


@pytest.mark.parametrize("command", [["serve"], ["token"], ["token", "create"], ["conformance"]])
def test_every_command_has_help(command: list[str]) -> None:
    result = afi(*command, "--help")
    assert result.returncode == 0
    assert "Usage" in result.stdout
