"""Shared fixtures: real ``afi serve`` processes (see :mod:`tests.support.servers`) and a provider.

The helpers the fixtures stand on, and that tests import directly, live in ``tests/support/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.postgres import Databases, postgres_server
from tests.support.servers import AfiServer, start_afi_serve


def _keys(db: Path) -> Any:
    from afi.auth.keys import KeyStore

    return KeyStore(db)


@pytest.fixture(scope="session")
def afi_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    """A real ``afi serve`` with keys: writer, reader and admin in space ``default``, other in ``other``."""
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
    with start_afi_serve(db, root) as server:
        server.tokens = tokens
        yield server


@pytest.fixture(scope="session")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    """A real ``afi serve`` without keys: on loopback, every caller is the local owner."""
    base = tmp_path_factory.mktemp("afi-open")
    with start_afi_serve(base / "afi.db", base / "files") as server:
        yield server


@pytest.fixture
def memory_provider(tmp_path: Path) -> Any:
    """A real MemoryProvider over a fresh SQLite file and workspace root (no keys)."""
    from afi.providers.memory.provider import MemoryProvider

    return MemoryProvider(tmp_path / "afi.db", tmp_path / "files")


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
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty store on each engine in turn: a SQLite file path, then a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "afi.db")
    return str(request.getfixturevalue("pg_store_url"))
