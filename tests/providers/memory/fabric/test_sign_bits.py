"""A large dense scope's first cut by sign bits (``fabric/sign_bits.py``): the rows it hands on to the exact
score hold the exact top rows, it honours recall's mask, and rows written or filled in after the bits
were built are signed too. ``PREFILTER_ROWS`` is lowered so a test stores few notes; SQLite only (the
PostgreSQL store searches its HNSW index)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from afi.providers.memory import create_memory, create_memory_fabric
from afi.providers.memory.fabric import vectors
from afi.providers.memory.fabric.fabric import MemoryFabric
from afi.providers.memory.fabric.sign_bits import SignBits
from tests.providers.memory.fabric.test_reembed import Projected

ROWS = 3_000
_WORDS = [f"w{i}" for i in range(2_000)]


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(_WORDS, k=12)) for _ in range(n)]


@pytest.fixture
def fabric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MemoryFabric:
    monkeypatch.setattr(vectors, "PREFILTER_ROWS", 1_000)
    monkeypatch.setattr(vectors, "CANDIDATES", 150)  # of 1,500 facts: a tenth go on to the exact score
    monkeypatch.setattr(vectors, "OVERSAMPLE", 10)
    memory = create_memory(tmp_path / "afi.db", tenant_id="t", resource_id="r", thread_id="main",
                           embedder=Projected(dims=384), vectors_after_write=False)  # fmt: skip
    made = create_memory_fabric(memory)
    for kind, seed in (("fact", 1), ("procedure", 2)):
        texts = _texts(ROWS // 2, seed)
        for at in range(0, len(texts), 500):
            made.remember_many([{"kind": kind, "content": text, "consolidate": False} for text in texts[at : at + 500]])
    return made


def _exact_and_cut(fabric: MemoryFabric, query: str, kinds: list[str], k: int) -> tuple[list[int], list[int]]:
    index = fabric.memory.index
    qvec = fabric.memory.embedder.embed([query])[0]
    with index.lock:
        index.refresh()
        mask = index.mask(kinds, 2e9, False)
        cut = [rowid for rowid, _ in index.top(qvec, mask, k)]
        sims = np.where(mask & index.vectored[: index.size], index.matrix[: index.size] @ qvec, -np.inf)
        exact = [int(index.rowids[i]) for i in np.argsort(-sims, kind="stable")[:k] if sims[i] > -np.inf]
    return exact, cut


def test_the_cut_keeps_the_exact_top_rows_of_the_mask(fabric: MemoryFabric) -> None:
    queries = _texts(50, 3)
    kept = total = 0
    for query in queries:
        exact, cut = _exact_and_cut(fabric, query, ["fact"], 10)
        kept += len(set(exact) & set(cut))
        total += len(exact)
    assert fabric.memory.index._signs.bits is not None  # the cut ran
    facts = {rowid for (rowid,) in fabric.memory.store.conn().execute("SELECT rowid FROM notes WHERE kind = 'fact'")}
    _, cut = _exact_and_cut(fabric, queries[0], ["fact"], 50)
    assert set(cut) <= facts  # the mask holds
    assert total == 500 and kept >= 0.95 * total, kept


def test_rows_written_after_the_bits_were_built_are_found(fabric: MemoryFabric) -> None:
    _exact_and_cut(fabric, "w1 w2 w3", ["fact"], 10)  # builds the bits
    assert fabric.memory.index._signs.bits is not None
    added = fabric.remember_many([{"kind": "fact", "content": text, "consolidate": False} for text in _texts(5, 4)])
    rowid_of = {note_id: rowid for rowid, note_id in fabric.memory.store.conn().execute("SELECT rowid, id FROM notes")}
    for note in added:
        exact, cut = _exact_and_cut(fabric, note.content, ["fact"], 1)
        assert cut == exact == [rowid_of[note.id]]


def test_the_cut_ranks_by_the_signs_around_the_centre() -> None:
    rng = np.random.default_rng(5)
    centre = rng.standard_normal(128).astype(np.float32) * 3  # the rows share a direction
    matrix = (rng.standard_normal((5_000, 128)) + centre).astype(np.float32)
    signs = SignBits(128)
    signs.build(matrix, np.ones(5_000, dtype=bool), 5_000)
    query = matrix[42] - centre  # a query along one row's own part
    allowed = np.ones(5_000, dtype=bool)
    assert 42 in set(signs.nearest(query, allowed, 5).tolist())
    allowed[42] = False
    assert 42 not in set(signs.nearest(query, allowed, 5).tolist())
    few = np.zeros(50, dtype=bool)  # the slots in use may be fewer than the bits kept
    few[[3, 7, 42]] = True
    assert sorted(signs.nearest(query, few, 100).tolist()) == [3, 7, 42]  # fewer allowed than asked: all
