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

import itertools
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Literal, Protocol

from ..errors import InvalidPath
from ..sqlite import Connections, configure
from .engine import Engine
from .sqlite_engine import SQLITE

__all__ = [
    "Connection",
    "Cursor",
    "Database",
    "Dialect",
    "MemoryDatabase",
    "SqliteDatabase",
    "TransactionState",
    "TransactionsMixin",
    "is_postgres_url",
    "open_database",
    "store_label",
    "store_location",
]

Dialect = Literal["sqlite", "postgresql"]
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(db: str | Path) -> bool:
    """True when the ``--db`` value names a PostgreSQL database rather than a SQLite file."""
    return isinstance(db, str) and db.startswith(_POSTGRES_SCHEMES)


def store_location(db: str | Path) -> str | Path:
    """The ``--db`` value as a store is named: a PostgreSQL URL as it is, a SQLite file as a path."""
    return db if is_postgres_url(db) else Path(db)


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
    def engine(self) -> Engine: ...

    @property
    def url(self) -> str: ...

    def read(self) -> AbstractContextManager[Connection]: ...

    def transaction(self) -> AbstractContextManager[Connection]: ...

    def in_transaction(self) -> bool: ...

    def transaction_serial(self) -> int | None: ...

    def after_transaction(self, hook: Callable[[bool], None]) -> None: ...

    def close(self) -> None: ...


_serials = itertools.count(1)


class TransactionState(threading.local):
    """This thread's place in a transaction: how deep, its serial, what runs when it ends."""

    depth = 0
    serial: int | None = None

    def __init__(self) -> None:
        self.hooks: list[Callable[[bool], None]] = []

    @contextmanager
    def outermost(self, begin: Callable[[], object], commit: Callable[[], object], rollback: Callable[[], object]
                  ) -> Iterator[bool]:  # fmt: skip
        """Run a transaction block: yields True for the outermost (which begins and ends the
        transaction and then runs the hooks with whether it committed), False for a nested one."""
        if self.depth:
            self.depth += 1
            try:
                yield False
            finally:
                self.depth -= 1
            return
        begin()
        self.depth, self.serial, self.hooks = 1, next(_serials), []
        committed = False
        try:
            yield True
            commit()
            committed = True
        except BaseException:
            rollback()
            raise
        finally:
            hooks = self.hooks
            self.depth, self.serial, self.hooks = 0, None, []
            for hook in hooks:
                hook(committed)

    def after(self, hook: Callable[[bool], None]) -> None:
        if not self.depth:
            raise RuntimeError("after_transaction() is called inside a transaction")
        self.hooks.append(hook)


class TransactionsMixin:
    """What every engine says of this thread's transaction, from its :class:`TransactionState`."""

    _tx: TransactionState

    def in_transaction(self) -> bool:
        return self._tx.depth > 0

    def transaction_serial(self) -> int | None:
        return self._tx.serial

    def after_transaction(self, hook: Callable[[bool], None]) -> None:
        self._tx.after(hook)


class SqliteDatabase(TransactionsMixin):
    """A SQLite store file: one connection per thread (WAL), ``BEGIN IMMEDIATE`` for a write."""

    dialect: Dialect = "sqlite"
    engine: Engine = SQLITE

    def __init__(self, path: str | Path, *, busy_timeout_ms: int | None = None) -> None:
        self.path = Path(path)
        self.connections = (
            Connections(path) if busy_timeout_ms is None else Connections(path, busy_timeout_ms=busy_timeout_ms)
        )
        self._tx = TransactionState()

    @property
    def url(self) -> str:
        return str(self.path)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        yield self.connections.get()

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        conn = self.connections.get()

        def rollback() -> None:
            if conn.in_transaction:
                conn.execute("ROLLBACK")

        with self._tx.outermost(lambda: conn.execute("BEGIN IMMEDIATE"), lambda: conn.execute("COMMIT"), rollback):
            yield conn

    def close(self) -> None:
        """Close this thread's connection (other threads' close when those threads end)."""
        self.connections.close()


class MemoryDatabase(TransactionsMixin):
    """An in-memory SQLite store (tests, examples): one connection, used by one thread at a time."""

    dialect: Dialect = "sqlite"
    engine: Engine = SQLITE
    url = ":memory:"

    def __init__(self) -> None:
        from .ensure import ensure_schema

        self.conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        configure(self.conn, wal=False)
        self.lock = threading.RLock()
        self._tx = TransactionState()
        ensure_schema(self.conn)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.lock:
            yield self.conn

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        conn = self.conn

        def rollback() -> None:
            if conn.in_transaction:
                conn.execute("ROLLBACK")

        with self.lock, self._tx.outermost(lambda: conn.execute("BEGIN"), lambda: conn.execute("COMMIT"), rollback):
            yield conn

    def close(self) -> None:
        self.conn.close()


_sqlite_open: weakref.WeakValueDictionary[tuple[str, int | None], SqliteDatabase] = weakref.WeakValueDictionary()
_sqlite_lock = threading.Lock()


def open_database(db: str | Path, *, busy_timeout_ms: int | None = None) -> Database:
    """Open the store the ``--db`` value names (a SQLite file path, ``:memory:``, or a ``postgresql://``
    URL), its schema brought up to date.

    Every part of a process that opens the same store gets the same :class:`Database` (while any part
    holds it), so a thread's transaction is one transaction whichever parts write in it: a SQLite
    file shares this thread's connection, a PostgreSQL database its pool. ``busy_timeout_ms`` gives a
    SQLite part connections of its own with that timeout (and so transactions of its own).
    """
    from .ensure import ensure_schema

    if is_postgres_url(db):
        from .postgres import PostgresDatabase

        return PostgresDatabase.open(str(db))
    if str(db) == ":memory:":
        return MemoryDatabase()
    key = (str(Path(db).expanduser().absolute()), busy_timeout_ms)
    with _sqlite_lock:
        found = _sqlite_open.get(key)
        if found is None:
            found = SqliteDatabase(key[0], busy_timeout_ms=busy_timeout_ms)
            try:
                ensure_schema(found.connections.get())
            except sqlite3.DatabaseError as err:
                found.close()
                raise _cannot_open(Path(key[0]), err) from None
            _sqlite_open[key] = found
    return found


def _cannot_open(path: Path, err: sqlite3.DatabaseError) -> InvalidPath:
    """Given a SQLite file that would not open, return the error that says why in a person's words."""
    if path.is_dir():
        return InvalidPath(f"this is a folder; --db names the store's file (for example {path / 'afi.db'})",
                           path=str(path))  # fmt: skip
    if not path.parent.is_dir():
        return InvalidPath("the store's folder does not exist", path=str(path))
    if path.exists() and "not a database" in str(err):
        return InvalidPath("this file is not a SQLite database, so not an afi store", path=str(path))
    return InvalidPath(f"cannot open or create the store here: {err}", path=str(path))
