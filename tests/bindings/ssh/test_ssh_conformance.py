"""The conformance kit through the SSH client adapter (the ``afi`` subsystem) passes wherever HTTP passes."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from afi.clients import HttpClient
from afi.clients.ssh import SshClient
from afi.conformance import Report, run_kit
from tests.support.servers import AfiServer
from tests.support.ssh import ssh_server


def passed(report: Report) -> set[str]:
    return {o.id for o in report.outcomes if o.result == "pass"}


def test_the_kit_passes_over_ssh_everywhere_it_passes_over_http(
    afi_server: AfiServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with (
        HttpClient(afi_server.url, afi_server.tokens["writer"]) as main,
        HttpClient(afi_server.url, afi_server.tokens["other"]) as other,
        HttpClient(afi_server.url) as anonymous,
        HttpClient(afi_server.url, "afi_" + secrets.token_urlsafe(32)) as forged,
    ):
        over_http = run_kit(main, other=other, anonymous=anonymous, forged=forged)
    base = tmp_path_factory.mktemp("ssh-kit")
    with ssh_server(base, "--conn-rate", "0", "--cmd-rate", "0") as server:
        clients = {
            "main": SshClient(port=server.port, identity=server.keys["writer"]),
            "other": SshClient(port=server.port, identity=server.keys["other"]),
            "anonymous": SshClient(port=server.port, identity=None),
            "forged": SshClient(port=server.port, identity=server.keys["stranger"]),
        }
        try:
            over_ssh = run_kit(clients["main"], **{k: v for k, v in clients.items() if k != "main"})
        finally:
            for client in clients.values():
                client.close()
    assert over_ssh.failures() == [], [f"{o.id}: {o.detail}" for o in over_ssh.failures()]
    assert passed(over_http) <= passed(over_ssh), passed(over_http) - passed(over_ssh)
    for must_run in ("auth.missing", "auth.bad", "cloak.stat", "cloak.search", "search.semantic.threshold"):
        assert must_run in passed(over_ssh), must_run


def test_a_declared_command_limit_is_checked_by_the_kit(tmp_path: Path) -> None:
    with (
        ssh_server(tmp_path, "--conn-rate", "0", "--cmd-rate", "20") as server,
        SshClient(port=server.port, identity=server.keys["writer"]) as client,
    ):
        report = run_kit(client, only=["limits."])
    outcome = {o.id: o.result for o in report.outcomes}
    assert outcome["limits.rate"] == "pass"
    assert outcome["cleanup"] == "pass"


def test_a_broken_subsystem_client_fails_the_kit(tmp_path: Path) -> None:
    class Lossy(SshClient):
        def read(self, path: str, *, offset: int = 0, length: int | None = None):  # type: ignore[no-untyped-def]
            result = super().read(path, offset=offset, length=length)
            return result.model_copy(update={"data": result.data[1:]})

    with (
        ssh_server(tmp_path, "--conn-rate", "0", "--cmd-rate", "0") as server,
        Lossy(port=server.port, identity=server.keys["writer"]) as lossy,
    ):
        report = run_kit(lossy, only=["read."])
    assert not report.ok
