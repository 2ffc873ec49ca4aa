"""Bringing a PostgreSQL store to the one step list (:mod:`.steps`), each step's PostgreSQL form.

Migrations run once per URL per process, each step in one transaction under an advisory lock, so
replicas that start at once migrate once; a database a newer afi-memory migrated is refused. A
database that records PostgreSQL's old numbers of its steps has them rewritten onto the one list first
(:func:`.steps.renumbered`).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from .migrations import VERSION_TABLE, Applied, now, refuse_newer
from .pg_steps import T
from .steps import LATEST, STEPS, renumbered

if TYPE_CHECKING:  # a SQLite store opens without PostgreSQL's client (every provider imports this module)
    import psycopg

__all__ = ["LATEST", "STEPS", "T", "applied_pg_steps", "ensure_postgres_schema", "migrate_postgres", "pg_version"]

_MIGRATION_LOCK = 0x0AF1_5C4E  # pg_advisory_xact_lock key: one migrating process at a time

_ready: set[str] = set()
_ready_lock = threading.Lock()


def _version_table(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT to_regclass(%s)", (VERSION_TABLE,)).fetchone()
    return row is not None and row[0] is not None


def _recorded(conn: psycopg.Connection[Any]) -> list[Applied]:
    if not _version_table(conn):
        return []
    rows = conn.execute(f"SELECT number, name, applied_at FROM {VERSION_TABLE} ORDER BY number").fetchall()
    return [Applied(int(n), str(name), str(at)) for n, name, at in rows]


def applied_pg_steps(conn: psycopg.Connection[Any]) -> list[Applied]:
    """The steps the database records, in order, on the one step list (a database that records the
    old numbers is read as it will be once migrated; nothing is changed)."""
    recorded = _recorded(conn)
    return renumbered(recorded, at=now()) or recorded


def pg_version(conn: psycopg.Connection[Any]) -> int:
    """The highest step the database records on the one list (0 for a database afi-memory never opened)."""
    return max((step.number for step in applied_pg_steps(conn)), default=0)


def _renumber(conn: psycopg.Connection[Any]) -> None:
    rows = renumbered(_recorded(conn), at=now())
    if rows is not None:
        conn.execute(f"DELETE FROM {VERSION_TABLE}")
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {VERSION_TABLE} (number, name, applied_at) VALUES (%s, %s, %s)",
                [(row.number, row.name, row.applied_at) for row in rows],
            )


def migrate_postgres(url: str) -> tuple[int, list[Applied]]:
    """Apply the database's pending steps, each in one transaction; return the version before and
    the steps applied. Raises Unsupported when a newer afi-memory migrated the database."""
    from .postgres import pg_connect, redact_url

    where = redact_url(url)
    done: list[Applied] = []
    with pg_connect(url) as conn:
        before = pg_version(conn)
        refuse_newer(before, LATEST, where)
        version, first = before, renumbered(_recorded(conn), at="") is not None
        while version < LATEST or first:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} "
                    f"(number integer PRIMARY KEY, name {T} NOT NULL, applied_at {T} NOT NULL)"
                )
                if first:
                    _renumber(conn)
                    first = False
                version = pg_version(conn)
                refuse_newer(version, LATEST, where)
                if version < LATEST:
                    step = STEPS[version]
                    if step.postgres is not None:
                        step.postgres(conn)
                    applied = Applied(step.number, step.name, now())
                    conn.execute(
                        f"INSERT INTO {VERSION_TABLE} (number, name, applied_at) VALUES (%s, %s, %s)",
                        (applied.number, applied.name, applied.applied_at),
                    )
                    done.append(applied)
                    version = step.number
    return before, done


def ensure_postgres_schema(url: str) -> None:
    """Bring the database up to date once per URL in this process (cheap after the first call)."""
    with _ready_lock:
        if url in _ready:
            return
        migrate_postgres(url)
        _ready.add(url)
