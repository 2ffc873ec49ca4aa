"""Consolidation past ``fold_exact_rows``: the word index names the candidates instead of a scan of
every vector, and a write still folds into its near-duplicate."""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import pytest

from afi.providers.memory import create_memory, create_memory_fabric
from afi.providers.memory.fabric.embedders import HashEmbedder
from afi.providers.memory.fabric.vectors import FOLD_EXACT_ROWS
from tests.support.fold_notes import edited, prose_notes


def _fabric(path: Path, exact_rows: int):  # type: ignore[no-untyped-def]
    memory = create_memory(path, tenant_id="t", resource_id="r", thread_id="w")
    fabric = create_memory_fabric(memory)
    memory.index.fold_exact_rows = exact_rows
    return memory, fabric


def test_the_default_switches_at_a_quarter_million_rows(tmp_path: Path) -> None:
    memory, _ = _fabric(tmp_path / "m.db", FOLD_EXACT_ROWS)
    assert FOLD_EXACT_ROWS == 250_000
    index = memory.index
    assert index.folds_by_vectors()
    index.size = FOLD_EXACT_ROWS + 1
    assert not index.folds_by_vectors()
    memory.close()


@pytest.mark.parametrize("exact_rows", [FOLD_EXACT_ROWS, -1], ids=["vectors", "words"])
def test_a_near_duplicate_folds_and_a_new_note_does_not(tmp_path: Path, exact_rows: int) -> None:
    memory, fabric = _fabric(tmp_path / "m.db", exact_rows)
    originals = {}
    for text in prose_notes(400, seed=3):
        originals[text] = fabric.remember(kind="fact", content=text).id
    assert memory.index.folds_by_vectors() == (exact_rows == FOLD_EXACT_ROWS)
    rng = random.Random(9)
    folded = 0
    for text in rng.sample(sorted(originals), 60):
        note = fabric.remember(kind="fact", content=edited(text, rng))
        folded += note.supersedes == originals[text] or note.id == originals[text]
    inserted = sum(fabric.remember(kind="fact", content=text).supersedes is None for text in prose_notes(60, seed=4))
    print(f"fold_exact_rows={exact_rows}: 60 edited copies, {folded} folded; 60 new notes, {inserted} inserted")
    assert folded == 60
    assert inserted == 60
    memory.close()


def _colliding_words(embedder: HashEmbedder, count: int) -> list[tuple[str, str]]:
    """Pairs of different words the hash embedder puts in the same dimension."""
    by_slot: dict[int, list[str]] = defaultdict(list)
    for i in range(20_000):
        word = f"w{i}x"
        by_slot[embedder._slot(word)].append(word)
    pairs = [(words[0], words[1]) for words in by_slot.values() if len(words) >= 2]
    return pairs[:count]


@pytest.mark.parametrize("exact_rows", [FOLD_EXACT_ROWS, -1], ids=["vectors", "words"])
def test_a_note_sharing_no_word_folds_only_by_vectors(tmp_path: Path, exact_rows: int) -> None:
    """Two notes of different words that the 384 hashed dimensions cannot tell apart (cosine 1): the
    exact vector search folds one into the other; the word index does not, as no word is shared."""
    memory, fabric = _fabric(tmp_path / "m.db", exact_rows)
    pairs = _colliding_words(memory.embedder, 12)
    first = fabric.remember(kind="fact", content=" ".join(a for a, _ in pairs))
    twin = " ".join(b for _, b in pairs)
    assert float(memory.embedder.embed([twin])[0] @ memory.embedder.embed([first.content])[0]) > 0.999
    second = fabric.remember(kind="fact", content=twin)
    assert (second.supersedes == first.id) == (exact_rows == FOLD_EXACT_ROWS)
    memory.close()


def test_a_lower_threshold_reads_more_words(tmp_path: Path) -> None:
    """At threshold 0.5 a note sharing about half its words still folds through the word index, even
    when the words it shares are common and the words it does not share are new."""
    memory = create_memory(tmp_path / "m.db", tenant_id="t", resource_id="r", thread_id="w")
    fabric = create_memory_fabric(memory, consolidate={"threshold": 0.5})
    memory.index.fold_exact_rows = -1
    common = [f"common{i}" for i in range(10)]
    with memory.store.write():
        for i in range(300):  # each common word is in 300 notes: past the word index's posting cap
            fabric.remember(kind="fact", content=" ".join([*common, f"own{i}a", f"own{i}b", f"own{i}c"]))
    first = fabric.remember(kind="fact", content=" ".join(common))
    half = " ".join(common[:6] + [f"new{i}" for i in range(4)])  # 6 of 10 words shared: cosine 0.6
    cosine = float(memory.embedder.embed([half])[0] @ memory.embedder.embed([first.content])[0])
    assert cosine >= 0.5
    second = fabric.remember(kind="fact", content=half)
    assert second.supersedes == first.id
    memory.close()


def test_postgres_folds_through_its_graph(pg_store_url: str) -> None:
    """PostgreSQL asks its HNSW graph at every size, and the word index is never asked there."""
    memory = create_memory(pg_store_url, tenant_id="t", resource_id="r", thread_id="w")
    fabric = create_memory_fabric(memory)
    originals = {}
    with memory.store.write():
        for text in prose_notes(300, seed=6):
            originals[text] = fabric.remember(kind="fact", content=text, consolidate=False).id
    text = sorted(originals)[17]
    again = fabric.remember(kind="fact", content=text + " again")
    assert again.supersedes == originals[text]
    assert memory.store.every_match(memory.scope, text.split(), limit=10) is None
    memory.close()


def test_above_among_finds_rows_by_rowid_either_way(tmp_path: Path) -> None:
    """The candidates' slots are found by a binary search while rowids ascend, else one by one: the
    same rows either way, rows the index does not hold left out."""
    memory, fabric = _fabric(tmp_path / "m.db", -1)
    texts = prose_notes(200, seed=12)
    for text in texts:
        fabric.remember(kind="fact", content=text, consolidate=False)
    index = memory.index
    with index.lock:
        index.refresh()
        held = [int(r) for r in index.rowids[: index.size]]
        asked = [*held[::3], 10**9, -5, held[7]]
        query = memory.embedder.embed([texts[21]])[0]
        assert index._ascending
        fast = index.above_among(query, asked, 0.0, ["fact"], 1e12, False, limit=1000)
        index._ascending = False
        slow = index.above_among(query, asked, 0.0, ["fact"], 1e12, False, limit=1000)
    assert fast == slow
    assert {r for r, _ in fast} == set(held[::3]) | {held[7]}
    memory.close()


def test_a_cached_word_count_is_counted_again_as_the_store_grows() -> None:
    from afi.providers.memory.fabric.lexical import stale_after

    assert stale_after(0, 10) == 64  # a small store counts a rare word again after 64 changes
    assert stale_after(5_000, 10) == 5_000  # a common word's count is good while off by less than itself
    assert stale_after(3, 100_000) == 390  # at 100k, after a 256th of the store's changes
    assert stale_after(3, 1_000_000) == 1_024  # never more than 1,024 changes


def _two_scopes(path: Path, filler: list[str], exact_rows: int):  # type: ignore[no-untyped-def]
    """Another scope of the same store holding ``filler``, then this test's scope (its fabric)."""
    other = create_memory(path, tenant_id="o", resource_id="r", thread_id="w")
    other_fabric = create_memory_fabric(other)
    with other.store.write():
        for i, text in enumerate(filler):
            other_fabric.remember(kind="fact", content=f"{text} own{i}q", consolidate=False)
    other.close()
    return _fabric(path, exact_rows)


WORDS20 = [f"w{c}{d}zq" for c in "abcdefghij" for d in "xy"]


@pytest.mark.parametrize(
    ("first", "again", "filler"),
    [
        # cosine 0.86: 20 words said again with 7 more; the shared words are common elsewhere
        (" ".join(WORDS20), " ".join(WORDS20) + " " + " ".join(f"new{i}zq" for i in range(7)),
         [" ".join(WORDS20)] * 250),
        # cosine 0.89, most of what is shared is stopwords
        ("he said that he would not be able to do it because of the rain today",
         "he said that he would not be able to do it because of the snow tonight", ["said able"] * 250),
    ],
    ids=["more-words", "stopwords"],
)  # fmt: skip
def test_a_restatement_folds_through_words(tmp_path: Path, first: str, again: str, filler: list[str]) -> None:
    """A note sharing t² of its words has cosine t at most: the fold asks for 1 − t² of them, plus one."""
    memory, fabric = _two_scopes(tmp_path / "m.db", filler, -1)
    original = fabric.remember(kind="fact", content=first)
    cosine = float(memory.embedder.embed([first])[0] @ memory.embedder.embed([again])[0])
    assert cosine >= 0.85
    assert fabric.remember(kind="fact", content=again).supersedes == original.id
    memory.close()


def test_past_the_cap_the_vectors_decide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When more notes than the cap (here another scope's) hold the chosen words, the exact search decides."""
    from afi.providers.memory.fabric import consolidate

    monkeypatch.setattr(consolidate, "_WORD_CANDIDATES", 2048)
    text = "alpha bravo charlie delta echo foxtrot golf hotel"
    memory, fabric = _two_scopes(tmp_path / "m.db", [text] * 2100, -1)
    original = fabric.remember(kind="fact", content=text + " india")
    assert fabric.remember(kind="fact", content=text + " juliet").supersedes == original.id
    memory.close()


def test_a_low_threshold_folds_by_vectors(tmp_path: Path) -> None:
    """Below 0.5 a near-duplicate may share only stopwords, so the vectors decide whatever the size."""
    memory = create_memory(tmp_path / "m.db", tenant_id="t", resource_id="r", thread_id="w")
    fabric = create_memory_fabric(memory, consolidate={"threshold": 0.3})
    memory.index.fold_exact_rows = -1
    first = fabric.remember(kind="fact", content="it is what it is and it was")
    second = fabric.remember(kind="fact", content="it is not what it was at all, lemur")
    cosine = float(memory.embedder.embed([first.content])[0] @ memory.embedder.embed([second.content])[0])
    assert cosine >= 0.3 and second.supersedes == first.id
    memory.close()


@pytest.mark.parametrize("exact_rows", [FOLD_EXACT_ROWS, -1], ids=["vectors", "words"])
def test_notes_in_other_scripts_keep_their_own_rows(tmp_path: Path, exact_rows: int) -> None:
    """Words of any script are words: unrelated Russian, Japanese or emoji-only notes were one vector
    (no ASCII token) and one normalised text (empty), so each write overwrote the last."""
    memory, fabric = _fabric(tmp_path / "m.db", exact_rows)
    texts = ["Встреча с Анной в пятницу", "Купить молоко и хлеб", "東京で会議があります", "🎉🎉", "🚀", "!!!"]
    notes = [fabric.remember(kind="fact", content=text) for text in texts]
    assert len({note.id for note in notes}) == len(texts)
    assert all(note.supersedes is None for note in notes)
    again = fabric.remember(kind="fact", content="Встреча с Анной в пятницу!")  # the same words: the same note
    assert again.id == notes[0].id
    with memory.store.read() as conn:
        stored = {row[0] for row in conn.execute("SELECT content FROM notes WHERE status = 'active'")}
    assert set(texts[1:]) <= stored
    memory.close()
