"""The PostgreSQL engine: a psycopg connection pool per URL, statements in the SQLite engine's ``?`` style.

A thread borrows a pooled connection for the length of its outermost ``read()`` or ``transaction()``
and gives it back at the end, so a process holds as many connections as it has threads inside the
store at once (at most ``AFI_PG_POOL``, 16 by default), not one per thread it ever ran. Connections
are in autocommit mode: a read is one statement, a write is one explicit transaction; nested blocks on
the same thread join the outermost one.

The schema is brought up to date once per URL per process, under an advisory lock so that replicas
starting together migrate once.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from .. import config
from ..errors import Conflict, Internal, InvalidPath, Unsupported
from .database import Connection, Dialect, TransactionsMixin, TransactionState
from .engine import Engine
from .pg_engine import POSTGRES

__all__ = ["PostgresDatabase", "pg_connect", "redact_url", "to_psycopg"]

# a serialization failure or a deadlock: the server rolled the transaction back, nothing was kept (not
# 40003, statement_completion_unknown: a commit whose outcome is unknown is no conflict)
_ROLLED_BACK = frozenset({"40001", "40P01"})

_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|::|\?|:([A-Za-z_][A-Za-z0-9_]*)|%")


@functools.lru_cache(maxsize=2048)
def to_psycopg(sql: str) -> str:
    """Rewrite a statement's ``?`` and ``:name`` placeholders as psycopg's ``%s`` and ``%(name)s``.

    Placeholders inside quoted strings and identifiers are left alone, ``::`` casts too; every
    ``%`` is doubled, since psycopg reads placeholders inside literals as well.
    """

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "?":
            return "%s"
        if token == "%":
            return "%%"
        if match.group(1) is not None:
            return f"%({match.group(1)})s"
        return token.replace("%", "%%")  # psycopg reads placeholders inside literals too

    return _TOKEN.sub(replace, sql)


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***`` (for messages and ``afi db status``)."""
    parts = urlsplit(url)
    query = "&".join(
        "password=***" if pair.split("=", 1)[0].lower() == "password" else pair
        for pair in parts.query.split("&")
    ) if parts.query else parts.query  # fmt: skip
    if parts.password is None:
        return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit((parts.scheme, user + host, parts.path, query, parts.fragment))


def pg_connect(url: str) -> psycopg.Connection[Any]:
    """One autocommit connection to the store (migrations, status); a server that cannot be reached
    or refuses the login is an AfiError that names it (password hidden), not a traceback."""
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as err:
        reason = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
        raise Internal(f"cannot open the PostgreSQL store {redact_url(url)}: {reason}") from None


class PgConnection:
    """A pooled psycopg connection that takes ``?`` placeholders, as :class:`~.database.Connection` says."""

    __slots__ = ("raw",)

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = (), /) -> psycopg.Cursor[Any]:
        # params are always passed (an empty tuple too): psycopg then reads the rewritten text, whose
        # every % was doubled; with None it would send the doubled %% as it is
        with _refusing_nul():
            return self.raw.execute(to_psycopg(sql), params, prepare=False)

    def executemany(self, sql: str, params: Iterable[Sequence[Any]], /) -> None:
        with _refusing_nul(), self.raw.cursor() as cur:
            cur.executemany(to_psycopg(sql), params)


@contextmanager
def _refusing_nul() -> Iterator[None]:
    """PostgreSQL text cannot hold a NUL character (SQLite's can): say so as a refusal, not a crash."""
    try:
        yield
    except psycopg.DataError as err:
        if "NUL" not in str(err) and "\\u0000" not in str(err):
            raise
        raise InvalidPath("text holding a NUL character cannot be stored in a PostgreSQL store") from None


class _Held(threading.local):
    conn: PgConnection | None = None  # the connection this thread's outermost block borrowed


class PostgresDatabase(TransactionsMixin):
    """One PostgreSQL database; :meth:`open` shares it (and its pool) among every part of a process."""

    dialect: Dialect = "postgresql"
    engine: Engine = POSTGRES
    CHECK_IDLE_SECONDS = 1.0
    _open: ClassVar[dict[str, PostgresDatabase]] = {}
    _open_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, url: str, *, pool_size: int | None = None) -> None:
        self._url = url
        self._held = _Held()
        self._tx = TransactionState()
        from .postgres_schema import ensure_postgres_schema

        ensure_postgres_schema(url)
        self._last_used: dict[int, float] = {}  # id of a pooled connection -> when a block last gave it back
        self.pool = ConnectionPool(
            url,
            kwargs={"autocommit": True, "prepare_threshold": None},
            min_size=1,
            max_size=max(1, config.pg_pool_size() if pool_size is None else pool_size),
            configure=_configure,
            check=self._check,
            name="afi",
            open=True,
        )
        self._closed = False

    @classmethod
    def open(cls, url: str) -> PostgresDatabase:
        """The process's database for that URL, opened (and its schema migrated) at first use."""
        with cls._open_lock:
            found = cls._open.get(url)
            if found is None or found._closed:
                found = cls(url)
                cls._open[url] = found
            return found

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """Before lending a connection that sat idle a while, see that the server still has it (one
        round trip); a dead one is thrown away and replaced. After a server restart, calls then find
        fresh connections instead of failing once per pooled connection. A connection given back
        within the last ``CHECK_IDLE_SECONDS`` is lent unchecked (the hot path pays nothing)."""
        if time.monotonic() - self._last_used.get(id(conn), 0.0) > self.CHECK_IDLE_SECONDS:
            ConnectionPool.check_connection(conn)

    @classmethod
    def close_url(cls, url: str) -> None:
        """Close the process's pool on that URL, if one is open."""
        with cls._open_lock:
            found = cls._open.get(url)
        if found is not None:
            found.close()

    @property
    def url(self) -> str:
        return self._url

    @contextmanager
    def _borrow(self) -> Iterator[PgConnection]:
        held = self._held
        if held.conn is not None:  # a nested block: the outermost one gives the connection back
            yield held.conn
            return
        if self._closed:
            raise Unsupported("the store is closed")
        try:
            with self.pool.connection() as raw:
                held.conn = PgConnection(raw)
                try:
                    yield held.conn
                finally:
                    held.conn = None
                    if len(self._last_used) > 8 * self.pool.max_size:  # connections replaced since
                        self._last_used.clear()
                    self._last_used[id(raw)] = time.monotonic()
        except PoolTimeout:
            raise Internal(
                f"the PostgreSQL store {redact_url(self._url)} lent no connection within {self.pool.timeout:.0f} s "
                f"(all {self.pool.max_size} of this process's are busy, or the server does not answer)"
            ) from None
        except psycopg.OperationalError as err:
            if err.sqlstate in _ROLLED_BACK:
                raise Conflict("the write raced another one on the store and was rolled back; try it again") from None
            # the server went away or restarted: the pool replaces the connection
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise Internal(f"lost the PostgreSQL store {redact_url(self._url)}: {reason}") from None

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self._borrow() as conn:
            yield conn

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        with self._borrow() as conn:
            raw = conn.raw

            def rollback() -> None:
                if not raw.closed and raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    raw.execute("ROLLBACK")

            def commit() -> None:
                # COMMIT of a transaction a failed statement aborted answers ROLLBACK without raising
                if raw.execute("COMMIT").statusmessage == "ROLLBACK":
                    raise Internal("the store rolled the transaction back (a statement in it had failed)")

            with self._tx.outermost(lambda: raw.execute("BEGIN"), commit, rollback):
                yield conn

    def close(self) -> None:
        """Close the pool (every part of the process shares it: the process is done with the store)."""
        with self._open_lock:
            if self._open.get(self._url) is self:
                del self._open[self._url]
        self._closed = True
        self.pool.close()


def _configure(conn: psycopg.Connection[Any]) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)
    conn.execute("SET hnsw.ef_search = 64")
    # HNSW scans that a filter thins out keep reading the graph until enough rows pass: pgvector 0.8
    # and later; an older one ranks within its first ef_search candidates only
    with contextlib.suppress(psycopg.errors.UndefinedObject, psycopg.errors.InvalidParameterValue):
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
