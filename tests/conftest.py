"""Shared fixtures (servers from the one factory in :mod:`tests.support.servers`, a provider, the
embedded PostgreSQL) and the lanes (:mod:`tests.support.lanes`): ``make check`` runs the tests that
start no process, ``make test`` all of them. docs/testing.md says which fixture to reach for.

The helpers the fixtures stand on, and that tests import directly, live in ``tests/support/``.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.durations import DurationRecorder, longest_files_first
from tests.support.lanes import classify, forbid_processes, install_guard
from tests.support.postgres import Databases, postgres_server
from tests.support.servers import AfiServer, serve_store
from tests.support.warm import shutdown as stop_warm_launcher


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations",
        action="store_true",
        help="write each test file's seconds to tests/durations.json (make test runs the longest first)",
    )


def pytest_configure(config: pytest.Config) -> None:
    install_guard()
    # The stores the tests make, and the afi processes they start, use the hash embedder: a sentence
    # model costs a second to load and milliseconds a note. The tests of the real embedder ask for it
    # (--embedder minilm, AFI_EMBEDDER=minilm, or an OnnxMiniLM) and keep to small data.
    os.environ["AFI_EMBEDDER"] = "hash"
    if config.getoption("record_durations") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(DurationRecorder(), "afi-duration-recorder")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    classify(items)
    longest_files_first(items)


def pytest_sessionfinish(session: pytest.Session) -> None:
    stop_warm_launcher()  # the afi processes a test left running end with it


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    with forbid_processes(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    with forbid_processes(item):
        return (yield)


def _keys(db: Path) -> Any:
    from afi.auth.keys import KeyStore

    return KeyStore(db)


@pytest.fixture(scope="session")
def afi_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    """The app ``afi serve`` builds, served in this process, with keys: writer, reader and admin in space
    ``default``, other in ``other``."""
    base = tmp_path_factory.mktemp("afi-serve")
    db, root = base / "afi.db", base / "files"
    keys = _keys(db)
    tokens = {
        "writer": keys.create(space="default", scopes=("afi:write",), name="writer")[1],
        "reader": keys.create(space="default", scopes=("afi:read",), name="reader")[1],
        "admin": keys.create(space="default", scopes=("afi:admin",), name="admin")[1],
        "other": keys.create(space="other", scopes=("afi:write",), name="other")[1],
    }
    keys.close()
    with serve_store(db, root) as server:
        server.tokens = tokens
        yield server


@pytest.fixture(scope="session")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    """The app ``afi serve`` builds, served in this process, without keys: every caller is the local owner."""
    base = tmp_path_factory.mktemp("afi-open")
    with serve_store(base / "afi.db", base / "files") as server:
        yield server


@pytest.fixture(scope="session")
def afi_serve_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    """A real ``afi serve --port 0`` process without keys (the HTTP door's smoke test: the command starts,
    announces where it listens and answers)."""
    base = tmp_path_factory.mktemp("afi-process")
    with serve_store(base / "afi.db", base / "files", process=True) as server:
        yield server


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    """The app ``afi serve`` builds, served in this process, keyless, over a store of this module's own."""
    base = tmp_path_factory.mktemp("afi-module")
    with serve_store(base / "afi.db", base / "files") as server:
        yield server


@pytest.fixture(scope="module")
def ssh_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real ``afi ssh --port 0`` for the module, over a store of its own, without connection or command
    limits; keys ``writer``, ``reader`` (space ``default``), ``other`` (space ``other``) and ``stranger``
    (unknown). See :class:`tests.support.ssh.SshServer`."""
    from tests.support.ssh import ssh_server

    with ssh_server(tmp_path_factory.mktemp("ssh"), "--conn-rate", "0", "--cmd-rate", "0") as running:
        yield running


@pytest.fixture
def memory_provider(tmp_path: Path) -> Any:
    """A real MemoryProvider over a fresh SQLite file and workspace root (no keys)."""
    from afi.providers.memory.provider import MemoryProvider

    return MemoryProvider(tmp_path / "afi.db", tmp_path / "files")


@pytest.fixture
def provider(tmp_path: Path, store_url: str) -> Any:
    """A real MemoryProvider over a new store on each engine in turn (see ``store_url``), workspace in
    ``tmp_path/files``. A module that seeds it overrides it: ``def provider(provider): ...``."""
    from afi.providers.memory.provider import MemoryProvider

    return MemoryProvider(store_url, tmp_path / "files")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL with pgvector and pg_trgm, started once for the tests that ask for it (its own
    fsyncs off: the cluster is thrown away afterwards)."""
    with postgres_server(durable=False) as url:
        yield url


@pytest.fixture(scope="session")
def postgres_databases(postgres_url: str) -> Iterator[Databases]:
    """Fresh store databases on the tests' PostgreSQL, each copied from a migrated template."""
    databases = Databases(postgres_url)
    yield databases
    databases.close()


@pytest.fixture
def pg_store_url(postgres_databases: Databases) -> Iterator[str]:
    """The URL of a new, empty PostgreSQL store (schema at the latest step) for this test alone; its
    connection pool is closed and the database dropped afterwards."""
    url = postgres_databases.fresh()
    yield url
    postgres_databases.drop(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def two_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two new, empty stores on one engine (a store keeps one embedder's vectors): SQLite files, then
    PostgreSQL databases."""
    if request.param == "sqlite":
        yield str(tmp_path / "a.db"), str(tmp_path / "b.db")
        return
    databases = request.getfixturevalue("postgres_databases")
    made = [databases.fresh(), databases.fresh()]
    yield made[0], made[1]
    for url in made:
        databases.drop(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty store on each engine in turn: a SQLite file path, then a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "afi.db")
    return str(request.getfixturevalue("pg_store_url"))
