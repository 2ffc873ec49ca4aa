from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from afi.providers.memory import HashEmbedder, MemoryNote, MemoryValidationError, Scope, Store
from afi.providers.memory.fabric.render import render_note
from afi.providers.memory.fabric.store import iso_now
from afi.providers.memory.fabric.vector_bytes import unpack_vector
from afi.storage import LATEST
from afi.storage.trigram import trigram_query

SCOPE = Scope(tenant_id="t", resource_id="r", thread_id="main")


def _note(note_id: str, content: str, **kw: object) -> MemoryNote:
    now = iso_now()
    return MemoryNote(
        id=note_id,
        kind="fact",
        content=content,
        name=note_id,
        ingested_at=now,
        created_at=now,
        token_count=len(content) // 4,
        **kw,
    )  # type: ignore[arg-type]


def test_open_sets_wal_migrations_and_embedder(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = Store(db, embedder_name="hash-fnv1a-384", dims=384)
    conn = store.conn()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert store.migrations == list(range(1, LATEST + 1))
    store.close()
    again = Store(db, embedder_name="hash-fnv1a-384", dims=384)
    assert again.migrations == list(range(1, LATEST + 1))
    again.close()


def test_other_embedder_is_refused_naming_both_and_the_command_that_moves_the_store(tmp_path: Path) -> None:
    Store(tmp_path / "m.db", embedder_name="hash-fnv1a-384", dims=384).close()
    with pytest.raises(MemoryValidationError) as refused:
        Store(tmp_path / "m.db", embedder_name="minilm-l6", dims=384)
    message = str(refused.value)
    assert "'hash-fnv1a-384' (384 dims)" in message and "'minilm-l6' (384 dims)" in message, message
    assert "`afi db reembed --embedder minilm-l6`" in message


def test_insert_update_delete_keep_indexes_and_changes_in_sync(tmp_path: Path) -> None:
    store = Store(tmp_path / "m.db", embedder_name="e", dims=4)
    emb = np.array([1, 0, 0, 0], dtype=np.float32)
    seq1 = store.insert_note(SCOPE, _note("aaaaaaaaaaaa", "the canary deploy"), emb)
    conn = store.conn()
    row = conn.execute("SELECT rendered, seq, embedding FROM notes WHERE id = 'aaaaaaaaaaaa'").fetchone()
    note = store.select_notes(SCOPE, "id = ?", ("aaaaaaaaaaaa",))[0]
    assert row[0] == render_note(note)
    assert row[1] == seq1
    assert unpack_vector(row[2]).tolist() == [1, 0, 0, 0]
    tri = "SELECT rowid FROM notes_trigram WHERE notes_trigram MATCH ?"
    assert conn.execute(tri, (trigram_query(["anary dep"]),)).fetchall()
    lex = "SELECT rowid FROM notes_lexical WHERE notes_lexical MATCH ?"
    assert conn.execute(lex, ("deploying",)).fetchall()  # porter stemming

    updated = note.model_copy(update={"content": "rollback only", "valid_to": iso_now()})
    seq2 = store.update_note(SCOPE, updated)
    assert seq2 > seq1
    row = conn.execute("SELECT rendered, seq FROM notes WHERE id = 'aaaaaaaaaaaa'").fetchone()
    assert "valid_to" in row[0] and row[1] == seq2
    assert not conn.execute(tri, (trigram_query(["canary"]),)).fetchall()
    assert conn.execute(lex, ("rollback",)).fetchall()
    assert store.delete_note(SCOPE, "aaaaaaaaaaaa") == 1
    assert not conn.execute(lex, ("rollback",)).fetchall()
    assert [op for _, _, op in store.changes_since(SCOPE, 0)] == ["upsert", "upsert", "delete"]
    assert store.change_seq(SCOPE) == seq2 + 1
    other = Scope(tenant_id="t", resource_id="other", thread_id="main")
    assert store.change_seq(other) == 0
    store.close()


def test_failed_transaction_leaves_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "m.db", embedder_name="e", dims=4)
    with pytest.raises(RuntimeError), store.write():
        store.insert_note(SCOPE, _note("bbbbbbbbbbbb", "half written"), None)
        raise RuntimeError("boom")
    assert store.select_notes(SCOPE) == []
    assert store.change_seq(SCOPE) == 0
    store.close()


def test_working_compare_and_swap(tmp_path: Path) -> None:
    store = Store(tmp_path / "m.db", embedder_name="e", dims=4)
    assert store.get_working(SCOPE) == ({}, 0)
    assert store.cas_working(SCOPE, {"a": 1}, 0) == 1
    assert store.cas_working(SCOPE, {"a": 2}, 0) is None
    assert store.cas_working(SCOPE, {"a": 3}, 1) == 2
    assert store.get_working(SCOPE) == ({"a": 3}, 2)
    store.close()


def test_two_processes_share_the_file(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    store = Store(db, embedder_name="e", dims=4)
    store.insert_note(SCOPE, _note("cccccccccccc", "shared"), None)
    other = sqlite3.connect(db)
    assert other.execute("SELECT count(*) FROM notes").fetchone()[0] == 1
    other.close()
    store.close()


def test_memory_store_is_usable_and_hash_embedder_name_recorded() -> None:
    emb = HashEmbedder(dims=8)
    store = Store(":memory:", embedder_name=emb.name, dims=emb.dims)
    store.insert_note(SCOPE, _note("dddddddddddd", "x"), emb.embed(["x"])[0])
    assert dict(store.conn().execute("SELECT key, value FROM meta").fetchall()) == {
        "embedder": "hash-fnv1a-8",
        "dims": "8",
    }
    store.close()


def test_connections_of_ended_threads_are_closed(tmp_path: Path) -> None:
    """Worker pools retire idle threads; the connections those threads opened must not pile up."""
    import threading

    from afi.provider import Caller
    from afi.providers.memory.provider import MemoryProvider

    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    owner = Caller("local")

    def work(i: int) -> None:
        provider.write(owner, f"/facts/note-{i}.md", f"note {i}".encode())
        provider.read(owner, f"/facts/note-{i}.md")
        provider.write(owner, f"/files/file-{i}.txt", b"x")
        provider.list(owner, "/files")

    def burst(start: int) -> int:
        for i in range(start, start + 100):
            thread = threading.Thread(target=work, args=(i,))
            thread.start()
            thread.join()
        return len(os.listdir("/proc/self/fd"))

    work(0)
    # SQLite keeps some closed descriptors for reuse (a few dozen, up and down); a leak is ~2 per thread
    settled = burst(1)
    burst(101)
    assert burst(201) <= settled + 40
