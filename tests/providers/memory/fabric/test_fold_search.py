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


def _postings(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows, cols = np.nonzero(matrix)
    order = np.argsort(cols, kind="stable")
    indptr = np.zeros(matrix.shape[1] + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(cols, minlength=matrix.shape[1]))
    return indptr, rows[order].astype(np.int32), matrix[rows[order], cols[order]]


@pytest.mark.parametrize("seed", range(6))
def test_reachable_rows_never_drops_a_row_that_reaches_the_floor(seed: int) -> None:
    from afi.providers.memory.fabric.fold_search import reachable_rows

    rng = np.random.default_rng(seed)
    dims, n = 64, 3000
    # sparse rows of mixed sign and norm, a few dimensions in nearly every row, and planted near-copies
    matrix = np.where(rng.random((n, dims)) < 0.12, rng.normal(size=(n, dims)), 0.0).astype(np.float32)
    matrix[:, :3] += np.where(rng.random((n, 3)) < 0.9, rng.random((n, 3)) * 3, 0.0).astype(np.float32)
    queries = [np.where(rng.random(dims) < 0.15, rng.normal(size=dims), 0.0) for _ in range(40)]
    for i, query in enumerate(queries[:20]):
        matrix[rng.integers(n)] = query + rng.normal(size=dims) * 0.05 * (query != 0)
        queries[i] = query
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-6) * rng.uniform(0.8, 1.2, (n, 1))
    matrix = matrix.astype(np.float32)
    max_norm2 = float(np.einsum("ij,ij->i", matrix, matrix).max())
    postings = _postings(matrix)
    for query in queries:
        query = (query / np.linalg.norm(query)).astype(np.float32)
        sims = matrix @ query
        for floor in (0.2, 0.5, 0.85, 0.99):
            got = reachable_rows(postings, n, query, floor, max_norm2)
            assert set(np.flatnonzero(sims >= floor)) <= set(got.tolist())
            assert list(got) == sorted(got)


def test_words_every_note_holds_do_not_make_the_fold_search_score_every_note(tmp_path: Path) -> None:
    """A query weighted on words every note holds cannot be pruned by counting shared dimensions (two
    of them nearly reach the bound, and a fifth of the notes share a third); the rarest-first prefix
    and the bound that follows still leave only a handful of notes to score."""
    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c")
    fabric = create_memory_fabric(memory, consolidate=False)
    rng = random.Random(5)
    vocabulary = [f"w{i}" for i in range(150)]
    with memory.store.write():
        for _ in range(3000):
            fabric.remember(kind="fact", content="alpha beta " + " ".join(rng.sample(vocabulary, 6)))
    fabric.recall("alpha")  # builds the postings
    index = memory.index
    query = memory.embedder.embed(["alpha alpha alpha beta beta " + " ".join(rng.sample(vocabulary, 6))])[0]
    with index.lock:
        index.refresh()
        assert index._built == index.size == 3000
        pruned = index._pruned(query, 0.85 - 1e-4)
        assert pruned is not None and len(pruned) <= 32  # was: None, and all 3,000 rows were scored
        want = {int(index.rowids[i]) for i in np.flatnonzero((index.matrix[:3000] @ query) >= 0.85)}
        assert {r for r, _ in index.above(query, 0.85, ["fact"], time.time(), False, limit=1000)} == want
    memory.close()
