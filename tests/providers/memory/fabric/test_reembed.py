"""Moving a store's vectors over to another embedder (``fabric/reembed.py``), on both engines.

A store written with the hash embedder at 256 dims is re-embedded, to the hash embedder at 384 dims
(sparse to sparse, another size) and to a dense embedder of the tests' own (a seeded projection of the
hash vector: every component non-zero, as a model's), and compared with the same store written with
that embedder from the start: the same vector for every note version, the same answers, the same
column form and HNSW index on PostgreSQL. Notes written, rewritten and deleted while the batches run
are caught up at the swap. A provider that had the store open with the old embedder refuses to search
or write vectors afterwards, naming both embedders; opening a store with another embedder names the
command that moves it over.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
import pytest

from afi.clients import LocalClient
from afi.provider import Caller
from afi.providers.memory import Embedder, HashEmbedder, MemoryNote, MemoryValidationError, Scope, Store
from afi.providers.memory.fabric.reembed import STAGED, TARGET, reembed_store, staged_move
from afi.providers.memory.fabric.store import iso_now
from afi.providers.memory.fabric.vector_bytes import unpack_vector
from afi.providers.memory.provider import MemoryProvider
from afi.storage.database import is_postgres_url, open_database

SPACES = ("default", "other")
OLD = HashEmbedder(256)
_WORDS = [f"{a}{b}" for a in ("qu", "ze", "mo", "ka", "ti", "ro", "ve", "lu") for b in ("nar", "pel", "dox", "gim",
          "sab", "tor", "wek", "fi", "lon", "rud")]  # fmt: skip


class Projected:
    """A dense embedder of the tests' own: the hash embedder's vector through a fixed random projection
    (seeded), L2-normalised. Row by row, so a text's vector is the same alone or in a batch."""

    def __init__(self, dims: int = 64, seed: int = 7) -> None:
        self.dims = dims
        self.name = f"test-projected-{dims}-{seed}"
        self._hash = HashEmbedder(384)
        self._matrix = np.random.default_rng(seed).standard_normal((384, dims)).astype(np.float32)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, vector in enumerate(self._hash.embed(texts)):
            projected = vector @ self._matrix
            out[row] = projected / np.linalg.norm(projected)
        return out


def _text(n: int, space: str) -> str:
    rng = np.random.default_rng(n)
    return f"{space} " + " ".join(_WORDS[i] for i in rng.choice(len(_WORDS), 7, replace=False))


def build(db: str, root: Path, embedder: Embedder) -> MemoryProvider:
    """A store as a user's: facts in two spaces (one with a second version), a procedure, a file note."""
    provider = MemoryProvider(db, root, embedder=embedder)
    for space in SPACES:
        client = LocalClient(provider, Caller(principal="local", space=space))
        for n in range(12):
            client.write(f"/facts/topic-{n}.md", _text(n, space).encode())
        client.write("/facts/topic-3.md", f"{space} topic three moved to friday".encode())  # a new version
        client.write("/procedures/release.md", b"1. tag the build\n2. run the canary\n3. promote")
        client.write("/files/notes/readme.md", f"zebra crossing in the workspace file of {space}".encode())
        provider.fabric(space).fill_vectors()  # a dense embedder's vectors are made after the writes
    return provider


def vectors(db: str) -> dict[tuple[Any, ...], bytes]:
    """Every note version (by what it holds, not its id) and its vector, as float32 bytes."""
    database = open_database(db)
    with database.read() as conn:
        rows = conn.execute(
            "SELECT resource_id, kind, CASE WHEN kind = 'file' THEN NULL ELSE name END, path, content, status, "
            "valid_to IS NULL, embedding FROM notes"  # a file note is named by its id: another in each store
        ).fetchall()
    return {tuple(row[:-1]): _floats(row[-1]) for row in rows}


def _floats(value: Any) -> bytes:
    if hasattr(value, "to_numpy"):  # a PostgreSQL halfvec or sparsevec
        return bytes(value.to_numpy().astype(np.float32).tobytes())
    return bytes(unpack_vector(value).tobytes())


def fresh(embedder: Embedder, content: str) -> bytes:
    """A text's vector as a store keeps it: at half precision."""
    return bytes(embedder.embed([content])[0].astype(np.float16).astype(np.float32).tobytes())


def meta(db: str) -> dict[str, str]:
    with open_database(db).read() as conn:
        return dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dims')").fetchall())


def hnsw(db: str) -> list[tuple[str, str]]:
    """The PostgreSQL store's HNSW indexes and the column's type (nothing on SQLite)."""
    if not is_postgres_url(db):
        return []
    with open_database(db).read() as conn:
        found = conn.execute(
            "SELECT indexname, format_type(a.atttypid, a.atttypmod) FROM pg_indexes, pg_attribute a "
            "WHERE tablename = 'notes' AND indexname LIKE 'notes_embedding_hnsw_%' "
            "AND a.attrelid = 'notes'::regclass AND a.attname = 'embedding'"
        ).fetchall()
    return sorted((str(name), str(form)) for name, form in found)


def answers(provider: MemoryProvider) -> list[str]:
    """The best match of a semantic search for a few notes' own texts, in each space."""
    out = []
    for space in SPACES:
        client = LocalClient(provider, Caller(principal="local", space=space))
        for n in (1, 5, 9):
            page = client.search({"semantic": _text(n, space)}, path="/facts", limit=3)
            out.append(page.matches[0].path if page.matches else "")
    return out


@pytest.mark.parametrize("new", [HashEmbedder(384), Projected()], ids=["hash-384", "dense"])
def test_a_reembedded_store_is_the_store_written_with_that_embedder(
    two_stores: tuple[str, str], tmp_path: Path, new: Embedder
) -> None:
    moved, written = two_stores
    build(moved, tmp_path / "moved", OLD)
    before = vectors(moved)
    assert len(before) == 2 * 15  # 12 facts, a second version, a procedure, a file note: in each space
    phases: list[tuple[str, int, int]] = []

    done = reembed_store(open_database(moved), new, batch=5, progress=lambda *step: phases.append(step))

    assert (done.before, done.before_dims, done.embedder, done.dims) == (OLD.name, 256, new.name, new.dims)
    assert done.swapped and done.notes == len(before) and done.resumed == 0 and done.caught_up == 0
    assert [step for step in phases if step[0] == "re-embedding"][-1] == ("re-embedding", 30, 30)
    assert phases[-1] == ("swapping", 1, 1)
    assert meta(moved) == {"embedder": new.name, "dims": str(new.dims)}
    build(written, tmp_path / "written", new)
    after = vectors(moved)
    assert after == vectors(written)  # every version of every note, in every space
    assert all(vector == fresh(new, key[4]) for key, vector in after.items())
    assert after != before
    assert hnsw(moved) == hnsw(written)
    assert staged_move(open_database(moved)) is None
    found = answers(MemoryProvider(moved, tmp_path / "moved", embedder=new))
    assert found == answers(MemoryProvider(written, tmp_path / "written", embedder=new))
    assert found == ["/facts/topic-1.md", "/facts/topic-5.md", "/facts/topic-9.md"] * 2


def test_the_postgresql_column_follows_the_embedder(pg_store_url: str, tmp_path: Path) -> None:
    build(pg_store_url, tmp_path / "files", OLD)
    assert hnsw(pg_store_url) == [("notes_embedding_hnsw_sparse_256", "sparsevec")]
    reembed_store(open_database(pg_store_url), Projected(48))
    assert hnsw(pg_store_url) == [("notes_embedding_hnsw_half_48", "halfvec")]
    reembed_store(open_database(pg_store_url), HashEmbedder(384))
    assert hnsw(pg_store_url) == [("notes_embedding_hnsw_sparse_384", "sparsevec")]
    provider = MemoryProvider(pg_store_url, tmp_path / "files", embedder=HashEmbedder(384))
    assert answers(provider)[0] == "/facts/topic-1.md"


def test_notes_written_while_the_batches_run_are_caught_up_at_the_swap(store_url: str, tmp_path: Path) -> None:
    provider = build(store_url, tmp_path / "files", OLD)
    client = LocalClient(provider, Caller(principal="local", space="default"))
    writes = iter(
        [
            lambda: client.write("/facts/late.md", b"written after the first batch, quasar"),
            lambda: client.write("/facts/topic-0.md", b"topic zero rewritten after it was staged"),
            lambda: client.delete("/facts/topic-1.md"),
            lambda: client.write("/procedures/release.md", b"1. tag\n2. promote"),
        ]
    )

    def between_batches(phase: str, done: int, total: int) -> None:
        if phase == "re-embedding" and done:
            next(writes, lambda: None)()  # the old embedder's writes, while meta still names it

    new = HashEmbedder(384)
    done = reembed_store(open_database(store_url), new, batch=4, progress=between_batches)

    # the versions retired after their batch (topic-0's, the procedure's); new rows come in later batches
    assert done.caught_up >= 2
    after = vectors(store_url)
    assert done.notes == len(after)
    assert all(vector == fresh(new, key[4]) for key, vector in after.items()), "a note kept an old vector"
    contents = {key[4] for key in after}
    assert "written after the first batch, quasar" in contents
    assert "topic zero rewritten after it was staged" in contents
    moved = MemoryProvider(store_url, tmp_path / "files", embedder=new)
    found = LocalClient(moved, Caller(principal="local", space="default")).search({"semantic": "quasar"}, path="/facts")
    assert found.matches[0].path == "/facts/late.md"


@pytest.mark.parametrize("new", [HashEmbedder(384), Projected()], ids=["hash-384", "dense"])
def test_a_provider_open_with_the_old_embedder_refuses_after_the_swap(
    store_url: str, tmp_path: Path, new: Embedder
) -> None:
    old = build(store_url, tmp_path / "files", OLD)
    client = LocalClient(old, Caller(principal="local", space="default"))
    assert client.search({"semantic": _text(4, "default")}, path="/facts").matches[0].path == "/facts/topic-4.md"

    reembed_store(open_database(store_url), new)
    swapped = vectors(store_url)

    for attempt in (
        lambda: client.search({"semantic": "deploy window"}, path="/facts"),
        lambda: client.write("/facts/after.md", b"written by a process that still embeds with the old one"),
        lambda: client.write("/facts/topic-2.md", b"a new version: the old one retired, the new one inserted"),
    ):
        with pytest.raises(MemoryValidationError) as refused:
            attempt()
        message = str(refused.value)
        assert f"{new.name!r} ({new.dims} dims)" in message and "'hash-fnv1a-256' (256 dims)" in message, message
        assert "restart" in message
    assert vectors(store_url) == swapped  # nothing was written, the retired version's row rolled back too
    assert all(vector == fresh(new, key[4]) for key, vector in swapped.items())
    restarted = MemoryProvider(store_url, tmp_path / "files", embedder=new)
    again = LocalClient(restarted, Caller(principal="local", space="default"))
    assert again.search({"semantic": _text(4, "default")}, path="/facts").matches[0].path == "/facts/topic-4.md"


def test_opening_with_another_embedder_names_both_and_the_command(store_url: str, tmp_path: Path) -> None:
    build(store_url, tmp_path / "files", OLD)
    with pytest.raises(MemoryValidationError) as refused:
        Store(store_url, embedder_name="hash-fnv1a-384", dims=384)
    message = str(refused.value)
    assert "'hash-fnv1a-256' (256 dims)" in message and "'hash-fnv1a-384' (384 dims)" in message, message
    assert "afi db reembed --embedder hash`" in message and "no AFI_EMBEDDER" in message, message


def test_already_on_that_embedder_is_nothing_to_do_and_another_target_drops_the_staging(
    store_url: str, tmp_path: Path
) -> None:
    build(store_url, tmp_path / "files", OLD)
    database = open_database(store_url)
    unchanged = vectors(store_url)
    done = reembed_store(database, HashEmbedder(256))
    assert not done.swapped and done.notes == 0 and vectors(store_url) == unchanged

    class Stop(Exception):
        pass

    def stop_after_two(phase: str, done: int, total: int) -> None:
        if phase == "re-embedding" and done >= 8:
            raise Stop

    with pytest.raises(Stop):
        reembed_store(database, Projected(), batch=4, progress=stop_after_two)
    assert staged_move(database) == (Projected().name, 64, 8)
    assert meta(store_url) == {"embedder": OLD.name, "dims": "256"} and vectors(store_url) == unchanged

    resumed = reembed_store(database, Projected(), batch=4)
    assert resumed.swapped and resumed.resumed == 8 and resumed.notes == len(unchanged)

    with pytest.raises(Stop):
        reembed_store(database, HashEmbedder(384), batch=4, progress=stop_after_two)
    switched = reembed_store(database, HashEmbedder(200), batch=4)
    assert switched.discarded == HashEmbedder(384).name and switched.resumed == 0 and switched.swapped
    assert all(vector == fresh(HashEmbedder(200), key[4]) for key, vector in vectors(store_url).items())
    with database.read() as conn:
        assert not database.engine.table_columns(conn, STAGED) and not database.engine.table_columns(conn, TARGET)


def test_an_embedder_whose_vectors_are_not_its_dims_is_refused_before_the_swap(store_url: str, tmp_path: Path) -> None:
    build(store_url, tmp_path / "files", OLD)

    class Liar(Projected):
        def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
            return super().embed(texts)[:, :10]

    with pytest.raises(MemoryValidationError, match="64 dims were expected"):
        reembed_store(open_database(store_url), Liar())
    assert meta(store_url) == {"embedder": OLD.name, "dims": "256"}


def test_a_write_that_waited_for_the_swap_is_refused_once_it_is_in(pg_store_url: str) -> None:
    """PostgreSQL: a writer that read ``meta`` before the swap took the notes table, then waited for it,
    checks again after its statement and rolls back (its vector would fit: same form and size)."""
    old, new = Projected(64, seed=7), Projected(64, seed=8)
    store = Store(pg_store_url, embedder_name=old.name, dims=old.dims)
    scope = Scope(tenant_id="afi", resource_id="default", thread_id="main")

    def note(note_id: str, content: str) -> MemoryNote:
        now = iso_now()
        return MemoryNote(id=note_id, kind="fact", content=content, ingested_at=now, created_at=now, token_count=4)

    store.insert_note(scope, note("aaaaaaaaaaaa", "written before the move"), old.embed(["written before the move"])[0])
    outcome: list[str] = []

    def write() -> None:
        text = "written across the swap"
        try:
            store.insert_note(scope, note("bbbbbbbbbbbb", text), old.embed([text])[0])
            outcome.append("written")
        except MemoryValidationError as err:
            outcome.append(str(err))

    writer = threading.Thread(target=write)

    def hold(phase: str, done: int, total: int) -> None:
        if (phase, done) != ("swapping", 0):
            return
        writer.start()  # the swap holds the notes table now: the writer's insert waits for it
        with psycopg.connect(pg_store_url, autocommit=True) as watch:
            ends = time.monotonic() + 30
            while time.monotonic() < ends and not watch.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            ).fetchone()[0]:  # fmt: skip
                time.sleep(0.01)

    reembed_store(open_database(pg_store_url), new, progress=hold)
    writer.join(30)
    assert len(outcome) == 1 and f"{new.name!r} (64 dims)" in outcome[0], outcome
    assert [key[4] for key in vectors(pg_store_url)] == ["written before the move"]
