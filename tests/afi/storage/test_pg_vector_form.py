"""How a PostgreSQL store keeps its embeddings: ``sparsevec`` for the hash embedder, ``halfvec`` for a
dense one, chosen per store; a store made before (step 8, ``halfvec``) is converted by step 9 and
answers recall as it did, with the same half-precision numbers as the SQLite store."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgvector import HalfVector
from pgvector.psycopg import register_vector

from afi.errors import Unsupported
from afi.providers.memory import HashEmbedder, create_memory_fabric
from afi.providers.memory.fabric.memory import space_memory
from afi.providers.memory.fabric.store import Store
from afi.providers.memory.fabric.vector_bytes import pack_vector, unpack_vector
from afi.storage.migrations import VERSION_TABLE
from afi.storage.pg_derived_notes import LEXEMES_SQL, RENDERED_SQL
from afi.storage.postgres import PostgresDatabase
from afi.storage.postgres_schema import STEPS, T, migrate_postgres, pg_version
from tests.support.postgres import database_url

TEXTS = [
    "the deploy window for the billing service is Tuesday at noon",
    "the canary dashboards live in grafana under the fleet folder",
    "our on-call rotation changes every Monday morning",
    "the staging database is restored from last night's backup",
    "release notes are drafted by the team that ships the change",
    "the zebra crossing near the office was repainted in March",
    "quarterly planning starts two weeks before the quarter ends",
    "the build cache is kept for seven days on the runners",
]
QUESTIONS = ["when is the billing deploy window", "where are the canary dashboards", "how long is the build cache kept"]


def _column(url: str) -> str:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'notes'::regclass AND attname = 'embedding'"
        ).fetchone()
    assert row is not None
    return str(row[0])


def _hnsw(url: str) -> dict[str, str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes "
            "WHERE tablename = 'notes' AND indexname LIKE 'notes_embedding_hnsw%'"
        ).fetchall()
    return {str(name): str(definition) for name, definition in rows}


def _vectors(url: str) -> dict[str, np.ndarray]:
    with psycopg.connect(url) as conn:
        register_vector(conn)
        rows = conn.execute("SELECT id, embedding FROM notes WHERE embedding IS NOT NULL").fetchall()
    return {str(note_id): vector.to_numpy().astype(np.float32) for note_id, vector in rows}


def test_the_hash_embedders_vectors_are_sparse_and_a_dense_embedders_stay_halfvec(
    pg_store_url: str, postgres_databases: object
) -> None:
    fabric = create_memory_fabric(space_memory(pg_store_url, "default"))
    embedded = {fabric.remember(kind="fact", content=text).id: HashEmbedder().embed([text])[0] for text in TEXTS}
    assert _column(pg_store_url) == "sparsevec"
    assert list(_hnsw(pg_store_url)) == ["notes_embedding_hnsw_sparse_384"]
    assert "m='12'" in next(iter(_hnsw(pg_store_url).values()))
    # each stored vector is exactly what the SQLite store keeps for it (half precision, non-zeros only)
    stored = _vectors(pg_store_url)
    assert set(stored) == set(embedded)
    for note_id, vector in embedded.items():
        assert np.array_equal(stored[note_id], unpack_vector(pack_vector(vector)))
    # and read back through the store in SQLite's form, as consolidation and fork read them
    rows = fabric.memory.store.rows_with_embeddings(fabric.memory.scope, "1 = 1")
    assert len(rows) == len(TEXTS)
    assert all(np.array_equal(unpack_vector(row[-1]), stored[row[2]]) for row in rows)
    assert fabric.recall("billing deploy window", top_k=1).hits[0].content == TEXTS[0]

    dense_url = postgres_databases.fresh()  # type: ignore[attr-defined]
    try:
        store = Store(dense_url, embedder_name="minilm-l6-v2", dims=384)
        assert store.vector_form == "halfvec"
        assert _column(dense_url) == "halfvec"
        assert list(_hnsw(dense_url)) == ["notes_embedding_hnsw_half_384"]
    finally:
        postgres_databases.drop(dense_url)  # type: ignore[attr-defined]


@pytest.fixture
def step8_url(postgres_url: str) -> Iterator[str]:
    """An empty database migrated to step 8 only: the layout stores had before step 9 ("compact notes")."""
    name = "afi_step8_test"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    url = database_url(postgres_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {VERSION_TABLE} (number integer PRIMARY KEY, name {T} NOT NULL, applied_at {T} NOT NULL)"
        )
        for step in STEPS[:8]:
            with conn.transaction():
                if step.postgres is not None:
                    step.postgres(conn)
                conn.execute(f"INSERT INTO {VERSION_TABLE} VALUES (%s, %s, 'then')", (step.number, step.name))
    yield url
    PostgresDatabase.close_url(url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _old_store(sqlite_db: Path, url: str) -> None:
    """Put the SQLite store's notes into a step-8 database as that layout kept them (``halfvec``)."""
    with sqlite3.connect(sqlite_db) as lite:
        columns = [r[1] for r in lite.execute("PRAGMA table_xinfo(notes)").fetchall() if r[6] == 0]
        rows = lite.execute(f"SELECT {', '.join(columns)} FROM notes").fetchall()
        meta = lite.execute("SELECT key, value FROM meta").fetchall()
    at = columns.index("embedding")
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        conn.cursor().executemany("INSERT INTO meta VALUES (%s, %s)", meta)
        conn.cursor().executemany(
            f"INSERT INTO notes ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})",
            [(*r[:at], HalfVector(unpack_vector(r[at])) if r[at] else None, *r[at + 1 :]) for r in rows],
        )
        conn.execute("SELECT setval(pg_get_serial_sequence('notes', 'rowid'), (SELECT MAX(rowid) FROM notes))")
        conn.execute(
            "CREATE INDEX notes_embedding_hnsw_half_384 ON notes "
            "USING hnsw ((embedding::halfvec(384)) halfvec_cosine_ops)"
        )


def test_step_9_converts_an_older_store_and_it_recalls_as_before(tmp_path: Path, step8_url: str) -> None:
    sqlite_db = tmp_path / "afi.db"
    lite = create_memory_fabric(space_memory(str(sqlite_db), "default"))
    for text in TEXTS:
        lite.remember(kind="fact", content=text)
    expected = {q: lite.recall(q, top_k=1).hits[0].content for q in QUESTIONS}
    assert list(expected.values()) == [TEXTS[0], TEXTS[1], TEXTS[7]]
    lite.memory.store.close()
    _old_store(sqlite_db, step8_url)
    before = _vectors(step8_url)
    assert _column(step8_url) == "halfvec" and len(before) == len(TEXTS)

    _, applied = migrate_postgres(step8_url)

    assert [step.number for step in applied] == [step.number for step in STEPS[8:]]  # 9 and after
    assert _column(step8_url) == "sparsevec"
    assert list(_hnsw(step8_url)) == ["notes_embedding_hnsw_sparse_384"]
    after = _vectors(step8_url)
    assert after.keys() == before.keys() and all(np.array_equal(after[k], before[k]) for k in before)
    with psycopg.connect(step8_url) as conn:
        # the lexical index keeps which lexemes a note holds, the note only how many (step 11); the GINs'
        # pending lists are small; each rendering, derived again, is the text the SQLite store keeps
        counted = f"SELECT bool_and(lexemes = length({LEXEMES_SQL}) AND lexemes > 0) FROM notes"
        assert conn.execute(counted).fetchone() == (True,)
        derived = dict(conn.execute(f"SELECT id, {RENDERED_SQL} FROM notes").fetchall())
        options: dict[str, str] = dict(conn.execute(
            "SELECT c.relname, array_to_string(c.reloptions, ',') FROM pg_class c "
            "WHERE c.relname IN ('notes_lexical', 'notes_rendered_folded_trgm')"
        ).fetchall())  # fmt: skip
    assert options == {
        "notes_lexical": "gin_pending_list_limit=64",
        "notes_rendered_folded_trgm": "fastupdate=on,gin_pending_list_limit=64",
    }
    with sqlite3.connect(sqlite_db) as lite:
        assert derived == dict(lite.execute("SELECT id, rendered FROM notes").fetchall())
    migrated = create_memory_fabric(space_memory(step8_url, "default"))
    assert {q: migrated.recall(q, top_k=1).hits[0].content for q in QUESTIONS} == expected
    fresh = migrated.remember(kind="fact", content="the release train leaves every other Thursday")
    assert migrated.recall("when does the release train leave", top_k=1).hits[0].id == fresh.id


def test_step_11_refuses_a_rendering_it_cannot_derive_and_changes_nothing(tmp_path: Path, step8_url: str) -> None:
    """A stored rendering that is not its front matter followed by its content (written by hand) stops
    step 11 with ``unsupported`` naming the note; the store stays at step 10, every rendering as it was,
    and once the note is put right the step runs."""
    sqlite_db = tmp_path / "afi.db"
    lite = create_memory_fabric(space_memory(str(sqlite_db), "default"))
    ids = [lite.remember(kind="fact", content=text).id for text in TEXTS[:3]]
    lite.memory.store.close()
    _old_store(sqlite_db, step8_url)
    with psycopg.connect(step8_url, autocommit=True) as conn:
        right = conn.execute("SELECT rendered FROM notes WHERE id = %s", (ids[1],)).fetchone()[0]
        conn.execute("UPDATE notes SET rendered = 'written by hand' WHERE id = %s", (ids[1],))

    with pytest.raises(Unsupported) as refused:
        migrate_postgres(step8_url)

    assert ids[1] in refused.value.message and "step 10" in refused.value.message
    with psycopg.connect(step8_url) as conn:
        assert pg_version(conn) == 10
        kept = dict(conn.execute("SELECT id, rendered FROM notes").fetchall())
        assert kept[ids[1]] == "written by hand" and len(kept) == 3
        assert conn.execute("SELECT to_regclass('notes_kind_name') IS NOT NULL").fetchone() == (True,)
    with psycopg.connect(step8_url, autocommit=True) as conn:
        conn.execute("UPDATE notes SET rendered = %s WHERE id = %s", (right, ids[1]))
    _, applied = migrate_postgres(step8_url)
    assert [step.number for step in applied] == [step.number for step in STEPS[10:]]  # 11 and after
    with psycopg.connect(step8_url) as conn:
        assert conn.execute(f"SELECT {RENDERED_SQL} FROM notes WHERE id = %s", (ids[1],)).fetchone() == (right,)
