"""One store, two engines: a SQLite file (the default) or a PostgreSQL database, chosen by the ``--db`` value.

Every part that keeps something in the store opens it with :func:`open_database` and talks to it only
through :class:`Database`: ``read()`` for statements that change nothing, ``transaction()`` for a
write. Both join whatever this thread already holds, so a verb that opens one transaction makes every
part's writes inside it commit together or not at all. SQL is written once with ``?`` placeholders
(and ``:name`` ones where a statement reuses a value); the PostgreSQL engine rewrites them for
psycopg. Where the engines differ (full-text indexes, vectors, trigram queries) a part asks
``database.dialect`` and says each engine's SQL.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Literal, Protocol

from ..sqlite import Connections

__all__ = [
    "Connection",
    "Cursor",
    "Database",
    "Dialect",
    "SqliteDatabase",
    "is_postgres_url",
    "open_database",
    "store_label",
]

Dialect = Literal["sqlite", "postgresql"]
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(db: str | Path) -> bool:
    """True when the ``--db`` value names a PostgreSQL database rather than a SQLite file."""
    return isinstance(db, str) and db.startswith(_POSTGRES_SCHEMES)


def store_label(db: str | Path) -> str:
    """The store as a person may be shown it: a file path, or a PostgreSQL URL without its password."""
    if not is_postgres_url(db):
        return str(db)
    from .postgres import redact_url

    return redact_url(str(db))


class Cursor(Protocol):
    """What a statement returns, on either engine."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """A connection as the parts of the store use it: ``?`` placeholders on both engines."""

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ..., /) -> Cursor: ...

    def executemany(self, sql: str, params: Iterable[Sequence[Any]], /) -> Any: ...


class Database(Protocol):
    """One store: this thread's connection for reads, one transaction for a write."""

    @property
    def dialect(self) -> Dialect: ...

    @property
    def url(self) -> str: ...

    def read(self) -> AbstractContextManager[Connection]: ...

    def transaction(self) -> AbstractContextManager[Connection]: ...

    def in_transaction(self) -> bool: ...

    def close(self) -> None: ...


class SqliteDatabase:
    """A SQLite store file: one connection per thread (WAL), ``BEGIN IMMEDIATE`` for a write."""

    dialect: Dialect = "sqlite"

    def __init__(self, path: str | Path, *, busy_timeout_ms: int | None = None) -> None:
        self.path = Path(path)
        self.connections = (
            Connections(path) if busy_timeout_ms is None else Connections(path, busy_timeout_ms=busy_timeout_ms)
        )
        self._closed = threading.Event()

    @property
    def url(self) -> str:
        return str(self.path)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        yield self.connections.get()

    def transaction(self) -> AbstractContextManager[Connection]:
        return self.connections.transaction()

    def in_transaction(self) -> bool:
        return self.connections.get().in_transaction

    def close(self) -> None:
        self.connections.close()


def open_database(db: str | Path, *, busy_timeout_ms: int | None = None) -> Database:
    """Open the store the ``--db`` value names (a SQLite file path or a ``postgresql://`` URL), its
    schema brought up to date.

    PostgreSQL stores share one connection pool per URL in a process, however many parts open them.
    """
    from .ensure import ensure_schema

    if is_postgres_url(db):
        from .postgres import PostgresDatabase

        return PostgresDatabase.open(str(db))
    database = SqliteDatabase(db, busy_timeout_ms=busy_timeout_ms)
    ensure_schema(database.connections.get())
    return database
