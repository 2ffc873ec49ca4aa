"""The one step list: the same number for the same change on both engines, and stores made before it
(by each engine's own numbering) migrating forward, from stores made by that code (``old_stores/``)."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from afi.auth.keys import LOCAL_OWNER, KeyStore
from afi.providers.memory.provider import MemoryProvider
from afi.storage import LATEST, STEPS, applied_steps, file_version, migrate
from afi.storage.migrations import Applied
from afi.storage.pg_vector_form import HNSW_PREFIX
from afi.storage.postgres import PostgresDatabase
from afi.storage.postgres_schema import applied_pg_steps, migrate_postgres
from afi.storage.steps import OLD_NUMBERS, renumbered
from tests.support import warm
from tests.support.postgres import database_url
from tests.support.warm import AFI

OLD = Path(__file__).with_name("old_stores")

# each engine's steps as its code before the one list numbered and named them (commit ce66e2e)
OLD_SQLITE = ("initial layout", "notes by file name", "trigram indexes without positions", "audit by space",
              "snapshots", "file history", "oauth", "change stamps", "workspace of older stores",
              "workspace charged bytes")  # fmt: skip
OLD_POSTGRES = ("initial layout", "embeddings at half precision", "audit by space", "snapshots", "file history",
                "oauth", "compact notes", "change stamps", "renderings and lexemes derived",
                "workspace charged bytes")  # fmt: skip
NAMES = [step.name for step in STEPS]


OLD_TOP = 13  # the step the old numbers reached on both engines (their step 10)


def test_one_list_numbers_each_change_once_with_a_form_per_engine() -> None:
    assert [step.number for step in STEPS] == list(range(1, LATEST + 1))
    assert len(set(NAMES)) == LATEST
    assert all(step.sqlite is not None or step.postgres is not None for step in STEPS)
    for engine, old in (("sqlite", OLD_SQLITE), ("postgresql", OLD_POSTGRES)):
        mapped = OLD_NUMBERS[engine]  # type: ignore[index]
        assert {number: NAMES[new - 1] for number, new in mapped.items()} == dict(enumerate(old, 1))
        assert list(mapped.values()) == sorted(mapped.values())  # each engine's own order is kept
        # what an old store of this engine skips is a step with nothing to do on this engine
        skipped = set(range(1, OLD_TOP + 1)) - set(mapped.values())
        form = "sqlite" if engine == "sqlite" else "postgres"
        assert skipped and all(getattr(STEPS[n - 1], form) is None for n in skipped), (engine, skipped)
    # the change both engines made under different numbers has one number now
    assert NAMES.index("snapshots") + 1 == 6


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
@pytest.mark.parametrize("reached", range(1, 11))
def test_old_numbers_read_onto_the_one_list(engine: str, reached: int) -> None:
    old = OLD_SQLITE if engine == "sqlite" else OLD_POSTGRES
    recorded = [Applied(n, name, "then") for n, name in enumerate(old[:reached], 1)]
    rows = renumbered(recorded, at="now")
    top = OLD_NUMBERS[engine][reached]  # type: ignore[index]
    if rows is None:  # the old numbers were this list's already
        assert [row.name for row in recorded] == NAMES[:reached]
        return
    assert [(row.number, row.name) for row in rows] == [(n, NAMES[n - 1]) for n in range(1, top + 1)]
    kept = {row.name for row in rows if row.applied_at == "then"}
    assert kept == set(old[:reached])
    assert renumbered(rows, at="later") is None  # once on the list, a store stays as it is


def test_a_newer_afis_step_leaves_the_rows_alone() -> None:
    recorded = [Applied(s.number, s.name, "then") for s in STEPS] + [Applied(LATEST + 1, "from later", "then")]
    assert renumbered(recorded, at="now") is None


# ---- SQLite stores made by the code before the one list


def _sqlite_fixture(name: str, tmp_path: Path) -> Path:
    path = tmp_path / name
    path.write_bytes(gzip.decompress((OLD / f"{name}.gz").read_bytes()))
    return path


def _layout(conn: sqlite3.Connection) -> set[tuple[str, str, str]]:
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE name <> 'sqlite_sequence'").fetchall()
    return {(str(t), str(n), str(s)) for t, n, s in rows}


def _fresh_sqlite_layout(tmp_path: Path) -> set[tuple[str, str, str]]:
    conn = sqlite3.connect(tmp_path / "fresh.db", isolation_level=None)
    migrate(conn)
    try:
        return _layout(conn)
    finally:
        conn.close()


def _recorded(conn: sqlite3.Connection) -> list[tuple[int, str]]:
    return [(int(n), str(name)) for n, name in conn.execute("SELECT number, name FROM schema_version ORDER BY 1")]


def _run_afi(*args: str, db: str, root: Path) -> Any:
    env = {**os.environ, "AFI_DB": db, "AFI_ROOT": str(root), "COLUMNS": "200"}
    env.pop("AFI_SPACE", None)
    return warm.run([str(AFI), *args], capture_output=True, text=True, env=env, timeout=120, check=False)


def test_a_sqlite_store_at_the_old_step_10_is_on_the_one_list_with_its_data(tmp_path: Path) -> None:
    path = _sqlite_fixture("sqlite-v10.db", tmp_path)
    with sqlite3.connect(path) as conn:
        assert _recorded(conn) == list(enumerate(OLD_SQLITE, 1))  # as the old code left it
        counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("notes", "file_versions")}
    conn.close()

    shown = json.loads(_run_afi("db", "status", "--json", db=str(path), root=tmp_path / "files").stdout)
    # the old step 10 is step 13 here; what the list added since is pending until the store is opened
    pending = [{"number": n, "name": NAMES[n - 1]} for n in range(OLD_TOP + 1, LATEST + 1)]
    assert (shown["version"], shown["latest"], shown["pending"]) == (OLD_TOP, LATEST, pending)
    assert [(s["number"], s["name"]) for s in shown["applied"]] == list(enumerate(NAMES[:OLD_TOP], 1))

    provider = MemoryProvider(path, tmp_path / "files")
    assert b"the canary deploy" in provider.read(LOCAL_OWNER, "/facts/canary.md").data
    assert [k.name for k in KeyStore(path).list()] == ["old key"]
    conn = sqlite3.connect(path, isolation_level=None)
    assert _recorded(conn) == list(enumerate(NAMES, 1))
    assert {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in counts} == counts
    assert _layout(conn) == _fresh_sqlite_layout(tmp_path)
    conn.close()


def test_a_sqlite_store_at_the_old_step_4_migrates_forward(tmp_path: Path) -> None:
    path = _sqlite_fixture("sqlite-v4.db", tmp_path)
    conn = sqlite3.connect(path, isolation_level=None)
    assert _recorded(conn) == list(enumerate(OLD_SQLITE[:4], 1))
    assert file_version(conn) == 5  # "audit by space" is step 5 of the one list
    done = migrate(conn)
    assert [(s.number, s.name) for s in done] == [(n, NAMES[n - 1]) for n in range(6, LATEST + 1)]
    assert [(s.number, s.name) for s in applied_steps(conn)] == list(enumerate(NAMES, 1))
    assert _recorded(conn) == list(enumerate(NAMES, 1))
    assert conn.execute("SELECT content FROM notes").fetchall() == [("the canary deploy",)]
    assert conn.execute("SELECT value FROM meta WHERE key = 'workspace_root'").fetchone() == ("per-user",)
    assert _layout(conn) == _fresh_sqlite_layout(tmp_path)
    assert migrate(conn) == []
    conn.close()


# ---- PostgreSQL stores made by the code before the one list (plain-SQL dumps)


@pytest.fixture
def restore(postgres_url: str) -> Iterator[Any]:
    """Restores a dump in ``old_stores`` into a database of its own; returns the database's URL."""
    made: list[str] = []

    def restore(dump: str) -> str:
        name = f"afi_old_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        made.append(name)
        url = database_url(postgres_url, name)
        script = "\n".join(line for line in (OLD / dump).read_text().splitlines() if not line.startswith("\\"))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(script.encode())
        return url

    yield restore
    for name in made:
        PostgresDatabase.close_url(database_url(postgres_url, name))
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


_PG_LAYOUT = (
    "SELECT 'column', table_name || '.' || column_name, data_type || ' ' || coalesce(collation_name, '') || ' '"
    " || is_nullable || ' ' || coalesce(generation_expression, '') || ' ' || coalesce(column_default, '')"
    " FROM information_schema.columns WHERE table_schema = 'public'"
    " UNION ALL SELECT 'index', indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
    " UNION ALL SELECT 'function', proname, pg_get_functiondef(p.oid) FROM pg_proc p"
    " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' AND proname LIKE 'afi%'"
    " UNION ALL SELECT 'trigger', tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t WHERE NOT tgisinternal"
)


def _pg_layout(url: str) -> set[tuple[str, str, str]]:
    """The database's columns, indexes, functions and triggers, less the embedding's HNSW index, which
    follows the embedder a store is first opened with (afi.storage.pg_vector_form), not a step."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(_PG_LAYOUT).fetchall()
    return {(str(k), str(n), str(d)) for k, n, d in rows if not str(n).startswith(HNSW_PREFIX)}


def _pg_recorded(url: str) -> list[tuple[int, str]]:
    with psycopg.connect(url) as conn:
        return [(int(n), str(name)) for n, name in conn.execute("SELECT number, name FROM schema_version ORDER BY 1")]


def test_a_postgres_store_at_the_old_step_10_is_on_the_one_list_with_its_data(
    restore: Any, pg_store_url: str, tmp_path: Path
) -> None:
    url = restore("pg-v10.sql")
    assert _pg_recorded(url) == list(enumerate(OLD_POSTGRES, 1))

    shown = json.loads(_run_afi("db", "status", "--json", db=url, root=tmp_path / "files").stdout)
    # the old step 10 is step 13 here; what the list added since is pending until the store is opened
    pending = [{"number": n, "name": NAMES[n - 1]} for n in range(OLD_TOP + 1, LATEST + 1)]
    assert (shown["version"], shown["latest"], shown["pending"]) == (OLD_TOP, LATEST, pending)
    assert [(s["number"], s["name"]) for s in shown["applied"]] == list(enumerate(NAMES[:OLD_TOP], 1))

    provider = MemoryProvider(url, tmp_path / "files")
    assert b"the canary deploy" in provider.read(LOCAL_OWNER, "/facts/canary.md").data
    assert [k.name for k in KeyStore(url).list()] == ["old key"]
    assert _pg_recorded(url) == list(enumerate(NAMES, 1))
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM file_versions").fetchone() == (2,)
        assert [(s.number, s.name) for s in applied_pg_steps(conn)] == list(enumerate(NAMES, 1))
    assert _pg_layout(url) == _pg_layout(pg_store_url)


def test_a_postgres_store_at_the_old_step_7_migrates_forward(restore: Any, pg_store_url: str) -> None:
    url = restore("pg-v7.sql")
    assert _pg_recorded(url) == list(enumerate(OLD_POSTGRES[:7], 1))
    before, done = migrate_postgres(url)
    assert before == 9  # "compact notes" is step 9 of the one list
    assert [(s.number, s.name) for s in done] == [(n, NAMES[n - 1]) for n in range(10, LATEST + 1)]
    assert _pg_recorded(url) == list(enumerate(NAMES, 1))
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT content, front FROM notes").fetchall() == [
            ("the canary deploy", "---\nid: n1\n---\n")
        ]
    assert _pg_layout(url) == _pg_layout(pg_store_url)
    assert migrate_postgres(url) == (LATEST, [])
