"""Consolidation's SimHash bands (``fabric/fold_bands.py``, ``fabric/band_rows.py``), on both engines and
with both kinds of embedder: once a scope has its centre and every row is banded the bands name the
fold's candidates; they are written, rewritten and deleted with their note, never lead a write into a
retired version, catch up a chunk a write in a store made before them, and roll back with their write.

A scope's centre comes from its first ``CENTRE_ROWS`` notes (2,000 in a store; 40 here) and a write
bands ``BACKFILL_ROWS`` older rows (500; 25 here), so a test writes few notes.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from afi.providers.memory import HashEmbedder, create_memory, create_memory_fabric
from afi.providers.memory.fabric import band_rows, fold_bands
from afi.providers.memory.fabric.fabric import MemoryFabric
from afi.providers.memory.fabric.fold_bands import BANDS, bag_blob, bags, centre_of, codes, probes
from afi.providers.memory.fabric.types import MemoryNote
from tests.providers.memory.fabric.test_reembed import Projected

CENTRE = 40
BACKFILL = 25

_WORDS = [f"word{i}" for i in range(300)]


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(_WORDS, k=16)) + f" item{seed}x{i}" for i in range(n)]


@pytest.fixture(autouse=True)
def _small_scopes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fold_bands, "CENTRE_ROWS", CENTRE)
    monkeypatch.setattr(band_rows, "BACKFILL_ROWS", BACKFILL)


@pytest.fixture(params=["hash", "dense"])
def embedder(request: pytest.FixtureRequest) -> Any:
    return HashEmbedder() if request.param == "hash" else Projected()


def _fabric(url: str, embedder: Any) -> MemoryFabric:
    memory = create_memory(url, tenant_id="t", resource_id="r", thread_id="main", embedder=embedder)
    return create_memory_fabric(memory)


def _rows(fabric: MemoryFabric, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with fabric.memory.store.read() as conn:
        return [tuple(row) for row in conn.execute(sql, params).fetchall()]


def _band_count(fabric: MemoryFabric) -> int:
    return int(_rows(fabric, "SELECT COUNT(*) FROM note_bands")[0][0])


def _facts(fabric: MemoryFabric, texts: list[str]) -> list[MemoryNote]:
    return fabric.remember_many([{"kind": "fact", "content": text, "consolidate": False} for text in texts])


def _centre(fabric: MemoryFabric) -> Any:
    found = _rows(fabric, "SELECT centre FROM note_band_centres")
    assert len(found) == 1
    import numpy as np

    return np.frombuffer(bytes(found[0][0]), dtype=np.float64)


def _expected_bands(fabric: MemoryFabric) -> set[tuple[Any, ...]]:
    """(code, rowid) of every row of the scope as the bands of its content now, and (rowid, bag)."""
    centre = _centre(fabric)
    rows = _rows(fabric, "SELECT rowid, content FROM notes")
    found = codes(bags([text for _, text in rows]), centre)
    banded = {(int(code), int(rowid)) for (rowid, _), row in zip(rows, found, strict=True) for code in row}
    return banded | {(int(rowid), bag_blob(text)) for rowid, text in rows}


def _held_bands(fabric: MemoryFabric) -> set[tuple[Any, ...]]:
    """What the store keeps: (code, rowid) of ``note_bands``, (rowid, bag) of ``note_bags``."""
    banded = {(int(code), int(rowid)) for code, rowid in _rows(fabric, "SELECT code, note_rowid FROM note_bands")}
    return banded | {(int(rowid), bytes(bag)) for rowid, bag in _rows(fabric, "SELECT note_rowid, bag FROM note_bags")}


def test_a_query_probes_every_band_of_its_own_text() -> None:
    rows = bags(_texts(50, 1))
    centre = centre_of(rows)
    for row, row_codes in zip(rows, codes(rows, centre), strict=True):
        wanted = probes(row, centre)
        assert set(map(int, row_codes)) <= set(wanted)
        assert len({int(code) >> fold_bands.BITS for code in row_codes}) == BANDS  # one code a band
        assert len(wanted) <= BANDS * (1 + fold_bands.FLIPS)


def test_a_scope_is_banded_from_its_centre_rows_note_a_chunk_a_write(store_url: str, embedder: Any) -> None:
    fabric = _fabric(store_url, embedder)
    store, scope = fabric.memory.store, fabric.memory.scope
    _facts(fabric, _texts(CENTRE - 1, 2))
    assert _band_count(fabric) == 0 and store.band_backlog(scope) is None
    assert store.band_candidates(scope, "word1 word2") is None
    fabric.remember(kind="fact", content=_texts(1, 3)[0], consolidate=False)  # the CENTRE-th note
    # its own bands, and a chunk of the rows held before it, the newest first
    assert _band_count(fabric) == (1 + BACKFILL) * BANDS
    assert store.band_backlog(scope) == CENTRE - 1 - BACKFILL
    assert store.band_candidates(scope, "word1 word2") is None  # not every row banded yet
    fabric.remember(kind="fact", content=_texts(1, 4)[0], consolidate=False)
    assert store.band_backlog(scope) == 0
    assert _held_bands(fabric) == _expected_bands(fabric)
    assert store.band_candidates(scope, "word1 word2") is not None


def test_edited_copies_fold_through_the_bands(store_url: str, embedder: Any) -> None:
    fabric = _fabric(store_url, embedder)
    store, scope = fabric.memory.store, fabric.memory.scope
    notes = _facts(fabric, _texts(200, 5))
    fabric.remember(kind="fact", content="one more note to finish the catch-up", consolidate=False)
    assert store.band_backlog(scope) == 0
    rng = random.Random(6)
    named = folded = 0
    tried = rng.sample(notes, 40)
    for note in tried:
        words = note.content.split()
        words[rng.randrange(len(words) - 1)] = "zebra"
        edited = " ".join(words)
        candidates = store.band_candidates(scope, edited)
        assert candidates is not None  # the bands, not the search by words, named them
        named += note.id in {n.id for n in store.notes_by_rowid(scope, candidates).values()}
        written = fabric.remember(kind="fact", content=edited)
        folded += written.supersedes == note.id
    # a word of 17 replaced: cosine ~0.94 between the bags, so the bands (tuned for 0.85) name nearly all
    assert named >= 38 and folded == named, (named, folded)
    # a write folds into the current version only: the superseded ones keep their bands, out of the fold
    again = fabric.remember(kind="fact", content=written.content + " again")
    assert again.supersedes == written.id
    assert _held_bands(fabric) == _expected_bands(fabric)


def test_rewrites_and_deletes_keep_the_bands_of_the_rows_as_they_are(store_url: str, embedder: Any) -> None:
    fabric = _fabric(store_url, embedder)
    notes = _facts(fabric, _texts(70, 7))
    fabric.remember(kind="fact", content="one more note to finish the catch-up", consolidate=False)
    assert fabric.memory.store.band_backlog(fabric.memory.scope) == 0
    fabric.forget(id=notes[0].id)
    fabric.remember(kind="fact", id=notes[1].id, content="a wholly different text about nothing else")
    fabric.forget(id=notes[2].id, hold=True)
    assert _held_bands(fabric) == _expected_bands(fabric)
    # a held note keeps its bands but is never a fold target
    copy = fabric.remember(kind="fact", content=notes[2].content)
    assert copy.id != notes[2].id and copy.supersedes is None
    assert _held_bands(fabric) == _expected_bands(fabric)


def test_a_store_made_before_the_bands_catches_up_as_it_is_written(store_url: str, embedder: Any) -> None:
    fabric = _fabric(store_url, embedder)
    _facts(fabric, _texts(90, 8))
    with fabric.memory.store.write() as conn:  # as a store made before step 18 holds it once the step ran
        conn.execute("DELETE FROM note_bands")
        conn.execute("DELETE FROM note_band_centres")
    fabric.memory.close()
    reopened = _fabric(store_url, embedder)
    store, scope = reopened.memory.store, reopened.memory.scope
    assert _band_count(reopened) == 0  # opening it bands nothing
    writes = 0
    while store.band_backlog(scope) != 0:
        reopened.remember(kind="fact", content=_texts(1, 100 + writes)[0], consolidate=False)
        writes += 1
    assert writes == -(-91 // (BACKFILL + 0))  # 90 rows and the first new one, BACKFILL a write
    assert _held_bands(reopened) == _expected_bands(reopened)
    reopened.memory.close()


def test_a_write_rolled_back_takes_its_centre_and_bands_with_it(store_url: str, embedder: Any) -> None:
    fabric = _fabric(store_url, embedder)
    store, scope = fabric.memory.store, fabric.memory.scope
    _facts(fabric, _texts(CENTRE - 1, 9))
    with pytest.raises(RuntimeError), store.write(scope):
        fabric.remember(kind="fact", content=_texts(1, 10)[0], consolidate=False)
        assert store.band_backlog(scope) == CENTRE - 1 - BACKFILL
        raise RuntimeError("rolled back")
    assert _rows(fabric, "SELECT COUNT(*) FROM note_band_centres") == [(0,)] and _band_count(fabric) == 0
    fabric.remember(kind="fact", content=_texts(1, 11)[0], consolidate=False)
    fabric.remember(kind="fact", content=_texts(1, 12)[0], consolidate=False)
    assert store.band_backlog(scope) == 0
    assert _held_bands(fabric) == _expected_bands(fabric)


def test_notes_a_sync_inserts_at_once_are_banded(store_url: str, embedder: Any) -> None:
    fabric = _fabric(store_url, embedder)
    _facts(fabric, _texts(CENTRE + BACKFILL, 13))  # centre set and a chunk banded in this batch
    fabric.remember(kind="fact", content="one more note to finish the catch-up", consolidate=False)
    store, scope = fabric.memory.store, fabric.memory.scope
    assert store.band_backlog(scope) == 0
    stamp = "2026-01-01T00:00:00Z"
    incoming = [
        MemoryNote(id=f"fact-sync-{i}", kind="fact", content=text, ingested_at=stamp, created_at=stamp, token_count=5)
        for i, text in enumerate(_texts(30, 14))
    ]
    store.insert_notes(scope, incoming, list(embedder.embed([note.content for note in incoming])), origin="peer")
    assert _held_bands(fabric) == _expected_bands(fabric)
    edited = incoming[3].content.replace(incoming[3].content.split()[0], "zebra", 1)
    assert fabric.remember(kind="fact", content=edited).supersedes == "fact-sync-3"


def test_catch_up_bands_every_row_left_and_the_switch_turns_the_bands_off(store_url: str, embedder: Any) -> None:
    fabric = _fabric(store_url, embedder)
    store, scope = fabric.memory.store, fabric.memory.scope
    _facts(fabric, _texts(CENTRE - 1, 15))
    assert store.catch_up_bands(scope) == 0 and store.band_backlog(scope) is None  # too few notes for a centre
    # the batch gives the scope its centre, its own bands and one chunk of the rows held before it
    _facts(fabric, _texts(100, 16))
    assert store.band_backlog(scope) == CENTRE - 1 - BACKFILL
    assert store.catch_up_bands(scope) == CENTRE - 1 - BACKFILL
    assert store.band_backlog(scope) == 0 and store.catch_up_bands(scope) == 0
    assert _held_bands(fabric) == _expected_bands(fabric)
    text = _texts(1, 16)[0]
    assert store.band_candidates(scope, text)
    store.fold_bands = False
    assert store.band_candidates(scope, text) is None
    assert fabric.remember(kind="fact", content=text.replace("item16x0", "copy")).supersedes is not None


def test_gc_deletes_the_bands_of_the_versions_it_drops(store_url: str, embedder: Any) -> None:
    from afi.providers.memory.fabric.memory import space_memory
    from afi.providers.memory.gc import collect_garbage

    fabric = create_memory_fabric(space_memory(store_url, "notes", embedder=embedder))
    notes = _facts(fabric, _texts(CENTRE + BACKFILL, 17))
    fabric.memory.store.catch_up_bands(fabric.memory.scope)
    for note in notes[:10]:  # superseded: the old versions' windows end now
        fabric.remember(kind="fact", content=note.content + " and more words besides", supersedes=note.id)
    before = _band_count(fabric)
    with fabric.memory.store.write(fabric.memory.scope):
        report = collect_garbage(fabric.memory.store.database, ["notes"], 0)
    assert report.note_versions == 10
    assert _band_count(fabric) == before - 10 * BANDS
    assert _held_bands(fabric) == _expected_bands(fabric)


def test_a_crowded_key_or_a_text_of_no_word_is_searched_without_the_bands(
    store_url: str, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fabric = _fabric(store_url, embedder)
    store, scope = fabric.memory.store, fabric.memory.scope
    _facts(fabric, _texts(CENTRE, 18) + ["👍"] * 20 + ["the same words again"] * 20)
    store.catch_up_bands(scope)
    assert store.band_candidates(scope, "👍") is None  # every text of no word shares every band
    assert len(store.band_candidates(scope, "the same words again") or []) >= 20
    monkeypatch.setattr(band_rows, "MAX_CANDIDATES", 10)
    assert store.band_candidates(scope, "the same words again") is None
    assert store.band_candidates(scope, _texts(1, 18)[0]) is not None


def test_a_sentence_embedders_fold_reads_the_texts_of_only_the_candidates_its_kept_bags_bring_near(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fabric = _fabric(store_url, Projected())
    store, scope = fabric.memory.store, fabric.memory.scope
    notes = _facts(fabric, _texts(200, 21))
    store.catch_up_bands(scope)
    read: list[int] = []
    real = store.columns_by_rowid

    def recorded(scope: Any, rowids: Any, columns: Any) -> Any:
        read.extend(rowids)
        return real(scope, rowids, columns)

    monkeypatch.setattr(store, "columns_by_rowid", recorded)
    edited = notes[5].content.replace(notes[5].content.split()[0], "zebra", 1)
    assert store.band_candidates(scope, edited) is not None
    assert fabric.remember(kind="fact", content=edited).supersedes == notes[5].id
    rowid_of = {str(note_id): int(rowid) for rowid, note_id in _rows(fabric, "SELECT rowid, id FROM notes")}
    assert rowid_of[notes[5].id] in read and len(set(read)) <= 3, read  # the candidates' texts: not read
    # a kept bag is what the fold goes by: one made to say another text keeps its note out of the fold
    with store.write(scope) as conn:
        conn.execute("UPDATE note_bags SET bag = ? WHERE note_rowid = ?",
                     (bag_blob("nothing like it at all"), rowid_of[notes[7].id]))  # fmt: skip
    edited = notes[7].content.replace(notes[7].content.split()[0], "zebra", 1)
    assert fabric.remember(kind="fact", content=edited).supersedes is None


def test_a_store_banded_before_step_19_bands_again_as_it_is_written_and_gains_its_bags(
    store_url: str, embedder: Any
) -> None:
    import psycopg
    import sqlite_utils

    from afi.storage import lite_steps, pg_steps
    from afi.storage.database import is_postgres_url

    fabric = _fabric(store_url, embedder)
    store, scope = fabric.memory.store, fabric.memory.scope
    _facts(fabric, _texts(90, 22))
    store.catch_up_bands(scope)
    bands = _band_count(fabric)
    fabric.memory.close()
    if is_postgres_url(store_url):  # as step 18 left a store: bands, no bags; then step 19 as it runs
        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute("DROP TABLE note_bags")
            pg_steps.fold_bags(conn)
    else:
        db = sqlite_utils.Database(store_url)
        db.execute("DROP TABLE note_bags")
        lite_steps.fold_bags(db)
        db.conn.commit()
        db.close()
    reopened = _fabric(store_url, embedder)
    store = reopened.memory.store
    assert store.band_backlog(scope) == 90 and _band_count(reopened) == bands
    assert store.band_candidates(scope, _texts(1, 22)[0]) is None  # not whole again yet: searched as before
    writes = 0
    while store.band_backlog(scope) != 0:
        reopened.remember(kind="fact", content=_texts(1, 200 + writes)[0], consolidate=False)
        writes += 1
    assert writes == -(-90 // BACKFILL)
    assert _held_bands(reopened) == _expected_bands(reopened)  # the bands kept, every bag made
    reopened.memory.close()
