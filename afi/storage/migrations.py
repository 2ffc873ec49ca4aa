"""A small migration runner: numbered steps applied in order, each in its own transaction.

The ``schema_version`` table records every applied step (number, name, UTC time). A file whose
recorded version is newer than the steps this code knows is refused before anything is written, so an
older ``afi`` never touches a store a newer one has changed. The steps are :mod:`.steps`' one list;
this module runs them on a SQLite file (:mod:`.postgres_schema` on a PostgreSQL database).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported

if TYPE_CHECKING:
    import psycopg
    import sqlite_utils

__all__ = [
    "VERSION_TABLE",
    "Applied",
    "Step",
    "applied_steps",
    "check_steps",
    "file_version",
    "now",
    "refuse_newer",
    "run_steps",
]

VERSION_TABLE = "schema_version"


@dataclass(frozen=True)
class Step:
    """One migration: its number (1, 2, … without gaps), a short name, and what it does on each engine
    (``None``: nothing on that engine; the step is recorded all the same)."""

    number: int
    name: str
    sqlite: Callable[[sqlite_utils.Database], None] | None
    postgres: Callable[[psycopg.Connection[Any]], None] | None = None


@dataclass(frozen=True)
class Applied:
    """A step as the file records it."""

    number: int
    name: str
    applied_at: str


def check_steps(steps: Sequence[Step]) -> int:
    """Given the steps, return the latest number; raise ValueError unless they are numbered 1, 2, … in order."""
    numbers = [step.number for step in steps]
    if numbers != list(range(1, len(numbers) + 1)):
        raise ValueError(f"migration steps must be numbered 1, 2, … in order, not {numbers}")
    return len(numbers)


def now() -> str:
    """The UTC time a step is recorded at."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def file_version(conn: sqlite3.Connection) -> int:
    """Return the highest step recorded in the file on the one step list (0 when none is: a new or a
    pre-migrations store)."""
    return max((step.number for step in applied_steps(conn)), default=0)


def _recorded(conn: sqlite3.Connection) -> list[Applied]:
    table = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (VERSION_TABLE,))
    if table.fetchone() is None:
        return []
    rows = conn.execute(f"SELECT number, name, applied_at FROM {VERSION_TABLE} ORDER BY number").fetchall()
    return [Applied(int(row[0]), str(row[1]), str(row[2])) for row in rows]


def applied_steps(conn: sqlite3.Connection) -> list[Applied]:
    """Return the steps the file records, in order, on the one step list (a file that records an
    engine's old numbers is read as it will be once migrated; nothing is changed)."""
    from .steps import renumbered

    recorded = _recorded(conn)
    return renumbered(recorded, at=now()) or recorded


def _renumber(conn: sqlite3.Connection) -> None:
    """Inside a transaction: rewrite the old numbers the file records onto the one step list."""
    from .steps import renumbered

    rows = renumbered(_recorded(conn), at=now())
    if rows is not None:
        conn.execute(f"DELETE FROM {VERSION_TABLE}")
        conn.executemany(
            f"INSERT INTO {VERSION_TABLE} (number, name, applied_at) VALUES (?, ?, ?)",
            [(row.number, row.name, row.applied_at) for row in rows],
        )


def refuse_newer(version: int, latest: int, where: str) -> None:
    """Raise Unsupported when the file's version is past the latest step this code knows."""
    if version > latest:
        raise Unsupported(
            f"the store {where} is at schema version {version}, but this afi knows versions up to {latest} only: "
            "it was changed by a newer afi-memory; upgrade afi-memory to open it (nothing was changed)"
        )


def run_steps(conn: sqlite3.Connection, steps: Sequence[Step], *, where: str) -> list[Applied]:
    """Apply the steps the file has not recorded yet, each in one transaction; return what was applied.

    Safe against other processes migrating the same file at once: each step re-reads the version
    under the write lock (``BEGIN IMMEDIATE``), so a step another process applied meanwhile is skipped.

    Args:
        conn: an autocommit connection (``isolation_level=None``) outside any transaction.
        where: how to name the file in an error message.

    Raises:
        Unsupported: the file's version is newer than the latest step.
    """
    from .steps import renumbered

    latest = check_steps(steps)
    version = file_version(conn)
    refuse_newer(version, latest, where)
    old_numbers = renumbered(_recorded(conn), at="") is not None
    if (version < latest or old_numbers) and conn.in_transaction:
        raise ValueError("migrations run outside any transaction: each step is one transaction of its own")
    if old_numbers:
        conn.execute("BEGIN IMMEDIATE")
        try:
            _renumber(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    done: list[Applied] = []
    while version < latest:
        db = _step_database(conn)
        conn.execute("BEGIN IMMEDIATE")
        try:
            _create_version_table(db)
            _renumber(conn)
            version = file_version(conn)
            refuse_newer(version, latest, where)
            if version < latest:
                step = steps[version]
                if step.sqlite is not None:
                    step.sqlite(db)
                if not conn.in_transaction:  # e.g. sqlite3's own executescript() commits first
                    raise RuntimeError(f"migration step {step.number} ended its own transaction")
                applied = Applied(step.number, step.name, now())
                conn.execute(
                    f"INSERT INTO {VERSION_TABLE} (number, name, applied_at) VALUES (?, ?, ?)",
                    (applied.number, applied.name, applied.applied_at),
                )
                done.append(applied)
                version = step.number
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return done


def _step_database(conn: sqlite3.Connection) -> sqlite_utils.Database:
    """Given the connection, return the sqlite-utils database the SQLite steps are written against."""
    # imported only when a step runs: sqlite-utils loads numpy, and an up-to-date store needs neither
    import sqlite_utils

    return sqlite_utils.Database(conn)


def _create_version_table(db: sqlite_utils.Database) -> None:
    db.table(VERSION_TABLE).create(
        {"number": int, "name": str, "applied_at": str},
        pk="number",
        not_null={"name", "applied_at"},
        if_not_exists=True,
    )
