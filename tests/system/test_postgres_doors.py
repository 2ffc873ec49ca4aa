"""The conformance kit through all four doors of an afi-memory whose store is PostgreSQL.

One real PostgreSQL (pgvector, pg_trgm); ``afi serve --db postgresql://…``, ``afi ssh`` (its rate
limits off: the kit opens many sessions) and ``afi mount`` on that database, each its own process.
The kit passes over HTTP, MCP (Streamable HTTP), SSH (the ``afi`` subsystem through OpenSSH) and the
FUSE mount, wherever it passes over HTTP."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from afi.clients import HttpClient
from afi.clients.fs import FsClient
from afi.clients.mcp import McpClient
from afi.clients.ssh import SshClient
from afi.conformance import Report, run_kit
from tests.support.fuse import afi_mount, needs_fuse
from tests.support.postgres import Databases
from tests.support.ssh import add_key, keygen, start_afi


@dataclass
class PgServe:
    """A running ``afi serve --ssh`` over a PostgreSQL store, with its API keys and SSH keys."""

    url: str
    ssh_port: int
    db: str
    root: Path
    base: Path
    tokens: dict[str, str]
    ssh_keys: dict[str, Path]


def passed(report: Report) -> set[str]:
    return {o.id for o in report.outcomes if o.result == "pass"}


@pytest.fixture(scope="module")
def pg_serve(postgres_databases: Databases, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServe]:
    from afi.auth.keys import KeyStore

    db = postgres_databases.fresh()
    base = tmp_path_factory.mktemp("pg-serve")
    root = base / "files"
    keys = KeyStore(db)
    tokens: dict[str, str] = {}
    for name, space in (("writer", "default"), ("other", "other")):
        tokens[name] = keys.create(space=space, scopes=("afi:write",), name=name)[1]
    writer_api = next(k.id for k in keys.list() if k.name == "writer")
    ssh_keys = {name: keygen(base, name) for name in ("writer", "other", "stranger")}
    add_key(db, ssh_keys["writer"].with_suffix(".pub"), api_key=writer_api)
    add_key(db, ssh_keys["other"].with_suffix(".pub"), space="other", scopes=("afi:write",))
    store = ["--db", db, "--root", str(root)]
    with (
        start_afi(["serve", "--host", "127.0.0.1", "--port", "0", *store], base / "xdg") as http,
        start_afi(["ssh", "--port", "0", "--conn-rate", "0", "--cmd-rate", "0", *store], base / "xdg") as ssh,
    ):
        yield PgServe(f"http://127.0.0.1:{http['http']}", ssh["ssh"], db, root, base, tokens, ssh_keys)
    postgres_databases.drop(db)


@pytest.fixture(scope="module")
def over_http(pg_serve: PgServe) -> Report:
    with (
        HttpClient(pg_serve.url, pg_serve.tokens["writer"]) as main,
        HttpClient(pg_serve.url, pg_serve.tokens["other"]) as other,
        HttpClient(pg_serve.url) as anonymous,
        HttpClient(pg_serve.url, "afi_" + secrets.token_urlsafe(32)) as forged,
    ):
        return run_kit(main, other=other, anonymous=anonymous, forged=forged)


def test_the_kit_passes_over_http(over_http: Report) -> None:
    assert over_http.failures() == [], [f"{o.id}: {o.detail}" for o in over_http.failures()]
    for must_run in ("cloak.stat", "cloak.search", "auth.missing", "auth.bad", "search.semantic.threshold"):
        assert must_run in passed(over_http), must_run
    assert over_http.count("pass") >= 70


def test_the_kit_passes_over_mcp(pg_serve: PgServe, over_http: Report) -> None:
    url = pg_serve.url + "/mcp"
    clients = [
        McpClient.http(url, pg_serve.tokens["writer"]),
        McpClient.http(url, pg_serve.tokens["other"]),
        McpClient.http(url),
        McpClient.http(url, "afi_" + secrets.token_urlsafe(32)),
    ]
    try:
        report = run_kit(clients[0], other=clients[1], anonymous=clients[2], forged=clients[3])
    finally:
        for client in clients:
            client.close()
    assert report.failures() == [], [f"{o.id}: {o.detail}" for o in report.failures()]
    assert report.count("pass") >= 70


def test_the_kit_passes_over_ssh(pg_serve: PgServe, over_http: Report) -> None:
    clients = {
        "main": SshClient(port=pg_serve.ssh_port, identity=pg_serve.ssh_keys["writer"]),
        "other": SshClient(port=pg_serve.ssh_port, identity=pg_serve.ssh_keys["other"]),
        "anonymous": SshClient(port=pg_serve.ssh_port, identity=None),
        "forged": SshClient(port=pg_serve.ssh_port, identity=pg_serve.ssh_keys["stranger"]),
    }
    try:
        report = run_kit(clients["main"], **{k: v for k, v in clients.items() if k != "main"})
    finally:
        for client in clients.values():
            client.close()
    assert report.failures() == [], [f"{o.id}: {o.detail}" for o in report.failures()]
    assert passed(over_http) <= passed(report), passed(over_http) - passed(report)


@needs_fuse
def test_the_kit_passes_through_a_mount(pg_serve: PgServe) -> None:
    for name in ("writer", "other"):
        (pg_serve.base / f"{name}.key").write_text(pg_serve.tokens[name] + "\n")
    with (
        afi_mount(pg_serve.base / "m-writer", pg_serve.db, pg_serve.root, "--token",
                  str(pg_serve.base / "writer.key")) as writer,
        afi_mount(pg_serve.base / "m-other", pg_serve.db, pg_serve.root, "--token",
                  str(pg_serve.base / "other.key")) as other,
    ):  # fmt: skip
        report = run_kit(FsClient(writer.path), other=FsClient(other.path))
    assert report.failures() == [], [f"{o.id}: {o.detail}" for o in report.failures()]
    assert report.count("pass") >= 70
