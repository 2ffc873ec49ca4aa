"""The storage seam: one ``Database`` over either engine, ``?`` placeholders on both, transactions that
join on a thread and roll back whole."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from afi.storage.database import is_postgres_url, open_database, store_label
from afi.storage.postgres import redact_url, to_psycopg


def test_placeholders_are_rewritten_outside_literals_only() -> None:
    sql = "SELECT ?, :name, 'it''s ? :x 5%', \"c?l\", x::int, a % 2 FROM t WHERE b LIKE 'a%' AND c = ?"
    assert to_psycopg(sql) == (
        "SELECT %s, %(name)s, 'it''s ? :x 5%%', \"c?l\", x::int, a %% 2 FROM t WHERE b LIKE 'a%%' AND c = %s"
    )


def test_urls_name_the_engine_and_hide_passwords() -> None:
    assert is_postgres_url("postgresql://u:p@h/db") and is_postgres_url("postgres://h/db")
    assert not is_postgres_url("/tmp/postgresql://x") and not is_postgres_url("afi.db")
    assert redact_url("postgresql://afi:s3cret@db.example:5433/afi?sslmode=require") == (
        "postgresql://afi:***@db.example:5433/afi?sslmode=require"
    )
    assert store_label("postgresql://afi@h/afi") == "postgresql://afi@h/afi"
    assert "s3cret" not in store_label("postgresql://afi:s3cret@h/afi")


def test_a_transaction_commits_whole_or_not_at_all(store_url: str) -> None:
    db = open_database(store_url)
    with db.transaction() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", ("kept", "1"))
    with pytest.raises(RuntimeError), db.transaction() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", ("lost", "1"))
        with db.transaction() as inner:  # joins the outer transaction: goes with it
            inner.execute("INSERT INTO meta (key, value) VALUES (?, ?)", ("lost-inner", "1"))
            assert db.in_transaction()
        raise RuntimeError("half-way")
    with db.read() as conn:
        keys = [row[0] for row in conn.execute("SELECT key FROM meta WHERE key IN (?, ?, ?) ORDER BY key",
                                                 ("kept", "lost", "lost-inner"))]  # fmt: skip
    assert keys == ["kept"]
    assert not db.in_transaction()


def test_threads_write_at_once_and_every_row_lands(store_url: str) -> None:
    db = open_database(store_url)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(25):
                with db.transaction() as conn:
                    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (f"t{n}-{i}", str(i)))
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with db.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM meta WHERE key LIKE 't%'").fetchone()[0] == 150


def _end_store_connections(url: str) -> None:
    """Have the server end every client connection to the store's database (as a restart does), and
    wait until those backends are gone. Only the pids it signalled are awaited: an autovacuum worker
    that visits the database meanwhile is not the store's and must not keep the wait going."""
    import psycopg

    clients = (
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
    )
    with psycopg.connect(url, autocommit=True) as killer:
        ended = [row[0] for row in killer.execute(clients).fetchall()]
        assert ended, "the store held no connection to end"
        for pid in ended:
            killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 10
        alive = "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ANY(%s)"
        while killer.execute(alive, (ended,)).fetchone()[0]:  # the signal takes a moment
            assert time.monotonic() < deadline, f"the server did not end the connections {ended}"
            time.sleep(0.02)


def test_a_lost_server_connection_is_a_clear_error(pg_store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call that meets a connection the server ended gets an ``internal`` AfiError naming the store
    (password hidden), not a driver traceback (the idle check that would replace it switched off)."""
    from afi.errors import Internal
    from afi.storage.postgres import PostgresDatabase

    monkeypatch.setattr(PostgresDatabase, "CHECK_IDLE_SECONDS", 1e9)
    db = open_database(pg_store_url)
    with db.read() as conn:
        conn.execute("SELECT 1").fetchone()
    _end_store_connections(pg_store_url)
    with pytest.raises(Internal) as caught, db.read() as conn:
        conn.execute("SELECT 1").fetchone()
    assert "lost the PostgreSQL store" in caught.value.message and "postgresql://" in caught.value.message


def test_after_a_server_restart_idle_connections_are_replaced_before_use(pg_store_url: str) -> None:
    """Every connection of the store ended while idle: the next calls find fresh ones, none fails."""
    db = open_database(pg_store_url)
    with db.read() as conn:
        conn.execute("SELECT 1").fetchone()
    _end_store_connections(pg_store_url)
    time.sleep(1.2)  # past CHECK_IDLE_SECONDS
    for _ in range(5):
        with db.read() as conn:
            assert conn.execute("SELECT 1").fetchone()[0] == 1


def test_an_unreachable_server_is_one_clear_error() -> None:
    from afi.errors import Internal

    with pytest.raises(Internal) as caught:
        open_database("postgresql://afi:s3cret@127.0.0.1:1/afi?connect_timeout=2")
    assert "cannot open the PostgreSQL store postgresql://afi:***@127.0.0.1:1/afi" in caught.value.message
    assert "s3cret" not in caught.value.message


def test_text_with_a_nul_is_refused_on_postgresql_and_nothing_is_written(pg_store_url: str) -> None:
    from afi.errors import InvalidPath

    db = open_database(pg_store_url)
    with pytest.raises(InvalidPath, match="NUL character"), db.transaction() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", ("before", "kept only if all is"))
        conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", ("nul", "a\x00b"))
    with db.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM meta WHERE key IN ('before', 'nul')").fetchone()[0] == 0


def test_a_percent_sign_reaches_postgresql_as_written_with_or_without_parameters(pg_store_url: str) -> None:
    db = open_database(pg_store_url)
    with db.read() as conn:
        assert conn.execute("SELECT 'a%' || 'b%%'").fetchone()[0] == "a%b%%"
        assert conn.execute("SELECT 'a%' || ?", ("c%",)).fetchone()[0] == "a%c%"
        assert conn.execute("SELECT 7 % 4").fetchone()[0] == 3


def test_a_commit_of_a_failed_transaction_is_never_taken_for_success(pg_store_url: str) -> None:
    """A statement fails inside a transaction and the caller swallows the error: PostgreSQL answers the
    COMMIT with ROLLBACK; the engine raises instead of reporting the transaction committed."""
    import psycopg

    from afi.errors import Internal

    db = open_database(pg_store_url)
    with pytest.raises(Internal, match="rolled the transaction back"), db.transaction() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", ("lost", "1"))
        with contextlib.suppress(psycopg.Error):
            conn.execute("SELECT 1 / 0")
    with db.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM meta WHERE key = 'lost'").fetchone()[0] == 0


def test_a_password_in_the_query_string_is_hidden_too() -> None:
    shown = redact_url("postgresql://db.example/afi?sslmode=require&password=s3cret&user=afi")
    assert shown == "postgresql://db.example/afi?sslmode=require&password=***&user=afi"


def test_a_deadlock_between_two_writers_is_a_conflict_for_one_and_nothing_for_the_other(pg_store_url: str) -> None:
    """Two threads lock two rows in opposite orders: PostgreSQL ends one transaction (SQLSTATE 40P01,
    which psycopg does not class as TransactionRollback); that writer gets a retryable conflict, not a
    500 saying the store was lost, and the other commits."""
    from afi.errors import AfiError

    db = open_database(pg_store_url)
    with db.transaction() as conn:
        conn.execute("CREATE TABLE pair (k integer PRIMARY KEY, v integer)")
        conn.execute("INSERT INTO pair VALUES (1, 0), (2, 0)")
    both_hold = threading.Barrier(2)
    outcome: dict[str, str] = {}

    def writer(name: str, first: int, second: int) -> None:
        try:
            with db.transaction() as conn:
                conn.execute("UPDATE pair SET v = v + 1 WHERE k = ?", (first,))
                both_hold.wait(timeout=10)
                conn.execute("UPDATE pair SET v = v + 1 WHERE k = ?", (second,))
            outcome[name] = "committed"
        except AfiError as err:
            outcome[name] = f"{err.code}: {err.message}"

    threads = [threading.Thread(target=writer, args=args) for args in (("a", 1, 2), ("b", 2, 1))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcome.values())[0] == "committed"
    assert sorted(outcome.values())[1].startswith("conflict: the write raced another one"), outcome
    with db.read() as conn:
        assert conn.execute("SELECT SUM(v) FROM pair").fetchone()[0] == 2  # one transaction's two updates
