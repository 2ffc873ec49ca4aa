"""``afi db copy``: a store built through the provider moves to PostgreSQL and back, whole, checked.

The store holds what a user's would: facts and procedures (with a consolidation and a retired
version), workspace files, a ledger session with messages and an observation, an API key and audit
rows. After each copy the destination answers the same reads and searches (its indexes are its own,
made again), and every table agrees by row count and checksum. A copy interrupted part-way resumes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from afi.app.dbcopy import CopyPlan, copy_store, verify_copy
from afi.auth.keys import KeyStore
from afi.clients import LocalClient
from afi.provider import Caller
from afi.providers.memory.fabric.vector_bytes import unpack_vector
from afi.providers.memory.provider import MemoryProvider
from tests.support.cli import afi

OWNER = Caller(principal="local", space="default")


def build_store(db: str | Path, root: Path) -> None:
    provider = MemoryProvider(db, root)
    client = LocalClient(provider, OWNER)
    for n in range(30):
        client.write(f"/facts/topic-{n}.md", f"the deploy window for service {n} is Tuesday {n}:00".encode())
    client.write("/facts/topic-3.md", b"the deploy window for service 3 moved to Friday")  # a new version
    client.write("/procedures/release.md", b"1. tag the build\n2. run the canary\n3. promote")
    client.write("/files/notes/readme.txt", b"zebra crossing in the workspace file")
    client.write("/files/notes/data.bin", bytes(range(256)))
    provider.ledger_write(OWNER, "append", "s1", {"messages": [
        {"role": "user", "text": "where do we keep the canary dashboards?", "entry_id": "m1"},
        {"role": "assistant", "text": "the canary dashboards live in grafana under fleet", "entry_id": "m2"},
    ]})  # fmt: skip
    provider.ledger_write(OWNER, "observe", "s1", {"text": "dashboards are in grafana", "source_entry_ids": ["m2"]})
    KeyStore(db).create(space="default", scopes=("afi:read",), name="reader")
    provider.snapshot_create(OWNER, "before-friday", at="2026-11-30T10:00:00Z")


def answers(db: str | Path, root: Path) -> dict[str, object]:
    """What a user would ask of the store, as comparable values."""
    client = LocalClient(MemoryProvider(db, root), OWNER)
    exact = client.search("Friday", path="/facts")
    semantic = client.search({"semantic": "deploy window for service 7"}, path="/facts", limit=3)
    files = client.search("zebra", path="/files")
    conversation_hits = client.search({"conversation": "canary dashboards", "session": "s1"}, path="/sessions")
    conversation = client.read("/sessions/s1.md").data.decode()
    return {
        "facts": sorted(e.path for e in client.list("/facts").entries),
        "topic-3": client.read("/facts/topic-3.md").data.decode().rsplit("\n", 2)[-2:],
        "exact": sorted(m.path for m in exact.matches),
        "semantic-top": semantic.matches[0].path if semantic.matches else None,
        "files": sorted(m.path for m in files.matches),
        "binary": client.read("/files/notes/data.bin").data,
        "session": "grafana under fleet" in conversation,
        "conversation": len(conversation_hits.matches),
        "keys": [k.name for k in KeyStore(db).list()],
        "snapshots": [(s.name, s.at) for s in MemoryProvider(db, root).snapshot_list(OWNER)],
    }


def test_a_store_moves_to_postgresql_and_back_whole(tmp_path: Path, pg_store_url: str) -> None:
    sqlite_db, back = tmp_path / "afi.db", tmp_path / "back.db"
    root = tmp_path / "files"
    build_store(sqlite_db, root)
    before = answers(sqlite_db, root)
    assert before["exact"] == ["/facts/topic-3.md"] and before["files"] == ["/files/notes/readme.txt"]
    assert before["semantic-top"] == "/facts/topic-7.md" and before["session"] is True
    assert before["conversation"] == 2

    there = afi("db", "copy", "--from", str(sqlite_db), "--to", pg_store_url, db=sqlite_db)
    assert there.returncode == 0, there.stderr
    assert "every table checked" in there.stdout and "DIFFERS" not in there.stdout
    assert "notes" in there.stdout and "ledger_entries" in there.stdout
    assert answers(pg_store_url, root) == before
    with psycopg.connect(pg_store_url) as conn:  # the indexes set aside for the bulk load are back
        indexes = {row[0] for row in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'")}
        leftovers = conn.execute("SELECT to_regclass('afi_copy_indexes'), to_regclass('afi_copy_progress')").fetchone()
    assert {
        "notes_lexical",
        "notes_rendered_folded_trgm",
        "ledger_fts_body",
        "notes_embedding_hnsw_sparse_384",  # the hash embedder's vectors are sparse (step 9)
    } <= indexes
    assert leftovers == (None, None)

    home = afi("db", "copy", "--from", pg_store_url, "--to", str(back), db=sqlite_db)
    assert home.returncode == 0, home.stderr
    assert answers(back, root) == before

    # the copy is a store of its own: writes after it land and are found
    client = LocalClient(MemoryProvider(pg_store_url, root), OWNER)
    client.write("/facts/after-copy.md", b"written after the copy, quasar")
    found = client.search("quasar", path="/facts")
    assert [m.path for m in found.matches] == ["/facts/after-copy.md"]


def test_an_interrupted_copy_resumes_where_it_stopped(tmp_path: Path, pg_store_url: str) -> None:
    sqlite_db, root = tmp_path / "afi.db", tmp_path / "files"
    build_store(sqlite_db, root)
    plan = CopyPlan(sqlite_db, pg_store_url, batch=4)
    batches: list[str] = []

    def interrupt(table: str, done: int, total: int) -> None:
        batches.append(table)
        if table == "notes" and done >= 12:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_store(plan, interrupt)
    assert not all(check.ok for check in verify_copy(plan, finish=False))  # part-way: notes differ
    resumed: list[tuple[str, int]] = []
    copy_store(plan, lambda table, done, total: resumed.append((table, done)))
    first_notes = next(done for table, done in resumed if table == "notes")
    assert first_notes >= 12  # went on from the last committed batch, not from the start
    checks = verify_copy(plan)
    assert all(check.ok for check in checks), [c for c in checks if not c.ok]
    assert answers(pg_store_url, root) == answers(sqlite_db, root)


def test_a_copy_refuses_a_destination_that_holds_a_store(tmp_path: Path, pg_store_url: str) -> None:
    first, second, root = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "files"
    build_store(first, root)
    build_store(second, root)
    refused = afi("db", "copy", "--from", str(first), "--to", str(second), db=first)
    assert refused.returncode == 2
    assert "already holds a store" in refused.stderr
    same = afi("db", "copy", "--from", str(first), "--to", str(first), db=first)
    assert same.returncode == 2 and "same store" in same.stderr
    missing = afi("db", "copy", "--from", str(tmp_path / "nope.db"), "--to", pg_store_url, db=first)
    assert missing.returncode == 2 and "no store at" in missing.stderr


def test_a_note_postgresql_cannot_derive_stops_the_copy_until_put_right(tmp_path: Path, pg_store_url: str) -> None:
    """A PostgreSQL store keeps a note's front matter and adds the content back: a SQLite note whose
    rendering does not end with its content (edited by hand) stops the copy with ``unsupported``
    naming it, the batch holding it is not written, and the copy resumes once it is put right."""
    sqlite_db, root = tmp_path / "afi.db", tmp_path / "files"
    build_store(sqlite_db, root)
    with sqlite3.connect(sqlite_db) as lite:
        note_id, right = lite.execute("SELECT id, rendered FROM notes ORDER BY rowid DESC LIMIT 1").fetchone()
        lite.execute("UPDATE notes SET rendered = 'edited by hand' WHERE id = ?", (note_id,))
    lite.close()

    refused = afi("db", "copy", "--from", str(sqlite_db), "--to", pg_store_url, db=sqlite_db)

    assert refused.returncode == 2, refused.stderr
    assert note_id in refused.stderr and "front matter" in refused.stderr and "Traceback" not in refused.stderr
    with psycopg.connect(pg_store_url) as conn:
        assert conn.execute("SELECT COUNT(*) FROM notes WHERE id = %s", (note_id,)).fetchone() == (0,)
    with sqlite3.connect(sqlite_db) as lite:
        lite.execute("UPDATE notes SET rendered = ? WHERE id = ?", (right, note_id))
    lite.close()
    again = afi("db", "copy", "--from", str(sqlite_db), "--to", pg_store_url, db=sqlite_db)
    assert again.returncode == 0, again.stderr
    assert "every table checked" in again.stdout and "DIFFERS" not in again.stdout
    assert answers(pg_store_url, root) == answers(sqlite_db, root)


def test_every_table_of_a_store_is_copied(tmp_path: Path) -> None:
    """A table a later migration adds must be copied too: every table of a fresh SQLite store but the
    full-text indexes (rebuilt from the rows they index) and the migrations' own bookkeeping."""
    from afi.app.dbcopy import NOT_COPIED, TABLES

    db = tmp_path / "afi.db"
    MemoryProvider(db, tmp_path / "files").stat(OWNER, "/")
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    virtual = [name for name, sql in rows if sql and sql.startswith("CREATE VIRTUAL TABLE")]
    tables = {name for name, _ in rows if not name.startswith("sqlite_") and name not in virtual
              and not any(name.startswith(v + "_") for v in virtual)}  # fmt: skip
    assert tables - {"schema_version", "schema_migrations"} - NOT_COPIED == {spec.name for spec in TABLES}
    assert tables >= NOT_COPIED


def test_an_older_stores_full_precision_vectors_copy_and_verify(tmp_path: Path, pg_store_url: str) -> None:
    """Rows embedded before vectors were kept at half precision (raw float32 blobs) are read as they
    are; a copy keeps them at half precision and its checksums compare them there."""
    import numpy as np

    sqlite_db, root = tmp_path / "afi.db", tmp_path / "files"
    build_store(sqlite_db, root)
    before = answers(sqlite_db, root)
    with sqlite3.connect(sqlite_db) as conn:  # rewrite every embedding as an older store kept it
        rows = conn.execute("SELECT rowid, embedding FROM notes WHERE embedding IS NOT NULL").fetchall()
        for rowid, blob in rows:
            conn.execute("UPDATE notes SET embedding = ? WHERE rowid = ?",
                         (unpack_vector(blob).astype(np.float32).tobytes(), rowid))  # fmt: skip
    assert rows  # there were embeddings to rewrite
    there = afi("db", "copy", "--from", str(sqlite_db), "--to", pg_store_url, db=sqlite_db)
    assert there.returncode == 0, there.stderr
    assert "every table checked" in there.stdout and "DIFFERS" not in there.stdout
    assert answers(pg_store_url, root) == before
