"""The write path's candidate search: ``VectorIndex.above`` against brute force, and the index
forgetting rows that a rolled-back transaction showed it."""

from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np
import pytest

from afi.providers.memory import create_memory, create_memory_fabric

WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
]


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(3, 10))) + f" n{i % 40}" for i in range(n)]


def _brute(index: object, query: np.ndarray, threshold: float, now: float) -> list[tuple[int, float]]:
    n = index.size  # type: ignore[attr-defined]
    sims = index.matrix[:n] @ query  # type: ignore[attr-defined]
    mask = index.mask(["fact"], now, False)  # type: ignore[attr-defined]
    return sorted(
        ((int(index.rowids[i]), float(sims[i])) for i in np.flatnonzero(mask & (sims >= threshold))),  # type: ignore[attr-defined]
        key=lambda item: -item[1],
    )


@pytest.mark.parametrize("threshold", [0.3, 0.6, 0.85, 0.95, 1.0])
def test_above_finds_exactly_the_rows_brute_force_finds(tmp_path: Path, threshold: float) -> None:
    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c")
    fabric = create_memory_fabric(memory, consolidate=False)
    texts = _texts(700, seed=1)
    for text in texts[:400]:
        fabric.remember(kind="fact", content=text)
    fabric.recall("alpha")  # builds the postings over the first 400 rows
    for text in texts[400:680]:  # a tail past the merge size, merged by the next recall
        fabric.remember(kind="fact", content=text)
    fabric.recall("bravo")
    for text in texts[680:]:  # then a short tail
        fabric.remember(kind="fact", content=text)
    proc = fabric.remember(kind="procedure", content=texts[0])  # other kinds never qualify
    index = memory.index
    now = time.time()
    with index.lock:
        index.refresh()
        assert index._built > 400 and index.size > index._built  # merged once, a tail left
        for query_text in [*texts[:60:3], *_texts(20, seed=9), "alpha", "zulu"]:
            query = memory.embedder.embed([query_text])[0]
            got = index.above(query, threshold, ["fact"], now, False, limit=1000)
            want = _brute(index, query, threshold, now)
            got_d, want_d = dict(got), dict(want)
            # a 1-D dot and a matvec may differ in the last bit: only a row on the threshold may differ
            assert {r for r in got_d.keys() ^ want_d.keys() if abs({**got_d, **want_d}[r] - threshold) > 1e-6} == set()
            assert all(abs(got_d[r] - want_d[r]) < 1e-6 for r in got_d.keys() & want_d.keys())
            assert [c for _, c in got] == sorted((c for _, c in got), reverse=True)
            assert proc.id not in {index.rowids[index.slot_of_rowid[r]] for r, _ in got}
    memory.close()


def test_above_scores_rows_whose_embedding_changed_after_the_postings(tmp_path: Path) -> None:
    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c")
    fabric = create_memory_fabric(memory)
    first = fabric.remember(kind="fact", content="kiwi mango papaya lychee guava")
    for text in _texts(50, seed=2):
        fabric.remember(kind="fact", content=text, consolidate=False)
    fabric.recall("kiwi")  # postings built with the first embedding
    same = fabric.remember(kind="fact", content="Kiwi, mango, papaya, lychee, guava.")  # same tokens: rewrites in place
    assert same.id == first.id
    fabric.remember(kind="fact", content="fig date plum quince", id=first.id)  # new embedding, same row
    index = memory.index
    with index.lock:
        index.refresh()
        slot = index.slot_of[first.id]
        assert slot < index._built and slot in index._moved
        query = memory.embedder.embed(["fig date plum quince"])[0]
        assert [r for r, _ in index.above(query, 0.99, ["fact"], time.time(), False)] == [int(index.rowids[slot])]
        old = memory.embedder.embed(["kiwi mango papaya lychee guava"])[0]
        assert index.above(old, 0.5, ["fact"], time.time(), False) == []
    memory.close()


def test_fold_uses_the_nearest_note_even_among_many_sharing_words(tmp_path: Path) -> None:
    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c")
    fabric = create_memory_fabric(memory)
    for text in _texts(300, seed=3):
        fabric.remember(kind="fact", content=text, consolidate=False)
    target = fabric.remember(
        kind="fact", content="alpha bravo charlie delta echo foxtrot golf hotel", consolidate=False
    )
    fabric.recall("alpha")
    folded = fabric.remember(kind="fact", content="alpha bravo charlie delta echo foxtrot golf hotel india")
    assert folded.supersedes == target.id  # cosine 0.94 with the target, the best of 300 look-alikes
    memory.close()


def test_a_rolled_back_write_leaves_no_phantom_rows_in_the_index(tmp_path: Path) -> None:
    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c")
    fabric = create_memory_fabric(memory)
    keep = fabric.remember(kind="fact", content="the rollout dashboard is grafana board seven")
    text = "the canary deploy waits for two green health checks"
    with pytest.raises(RuntimeError, match="abort"), memory.store.write():
        ghost = fabric.remember(kind="fact", content=text)
        again = fabric.remember(kind="fact", content=text)  # its search reads the uncommitted row
        assert again.id == ghost.id
        raise RuntimeError("abort")
    assert fabric.get(ghost.id) is None
    fresh = fabric.remember(kind="fact", content=text)
    assert fresh.id != ghost.id and fresh.supersedes is None
    assert [n.id for n in fabric.notes()] == sorted([keep.id, fresh.id])
    hits = fabric.recall("canary deploy health checks").hits
    assert [h.id for h in hits][:1] == [fresh.id] and ghost.id not in {h.id for h in hits}
    with memory.index.lock:
        assert ghost.id not in memory.index.slot_of
    memory.close()
