"""A many-note remember's fold searches made together (``fabric/batch_fold.py``): a batch leaves the
store as the same notes remembered one by one would, on both engines and with both kinds of embedder,
while the notes that fold into nothing go in together; the refusals still take the whole batch back.

A scope's bands start at ``CENTRE_ROWS`` notes (2,000 in a store; 40 here), so a test writes few notes.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from afi.providers.memory import HashEmbedder, create_memory, create_memory_fabric
from afi.providers.memory.fabric import band_rows, batch, fold_bands
from afi.providers.memory.fabric.errors import MemoryConflictError
from afi.providers.memory.fabric.fabric import MemoryFabric
from tests.providers.memory.fabric.test_reembed import Projected

_WORDS = [f"word{i}" for i in range(300)]


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(_WORDS, k=16)) + f" item{seed}x{i}" for i in range(n)]


def _edited(text: str, rng: random.Random) -> str:
    words = text.split()
    words[rng.randrange(len(words) - 1)] = "zebra"
    return " ".join(words)


@pytest.fixture(autouse=True)
def _small_scopes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fold_bands, "CENTRE_ROWS", 40)
    monkeypatch.setattr(band_rows, "BACKFILL_ROWS", 25)


@pytest.fixture(params=["hash", "dense"])
def embedder(request: pytest.FixtureRequest) -> Any:
    return HashEmbedder() if request.param == "hash" else Projected()


def _fabric(url: str, embedder: Any, thread: str) -> MemoryFabric:
    memory = create_memory(url, tenant_id="t", resource_id="r", thread_id=thread, embedder=embedder)
    return create_memory_fabric(memory)


def _seeded(fabric: MemoryFabric, stored: list[str], *, banded: bool) -> None:
    fabric.remember_many([{"kind": "fact", "content": text, "consolidate": False} for text in stored])
    if banded:
        fabric.memory.store.catch_up_bands(fabric.memory.scope)
        assert fabric.memory.store.band_backlog(fabric.memory.scope) == 0


def _items(stored: list[str], seed: int) -> list[dict[str, Any]]:
    """A burst of every sort of note: copies and edited copies of stored notes, new notes and their
    copies later in the batch, named notes, notes that must not fold, texts of no word."""
    rng = random.Random(seed)
    new = _texts(12, seed + 1)
    items: list[dict[str, Any]] = []
    picked = rng.sample(stored, 14)
    items += [{"kind": "fact", "content": text} for text in picked[:6]]
    items += [{"kind": "fact", "content": _edited(text, rng)} for text in picked[6:12]]
    items += [{"kind": "fact", "content": text} for text in new]
    items += [{"kind": "procedure", "content": text} for text in _texts(4, seed + 2)]
    items += [{"kind": "fact", "content": text, "consolidate": False} for text in picked[12:]]
    items += [{"kind": "fact", "content": "!!! ???"}, {"kind": "fact", "content": "!!! ???"}]
    items += [{"kind": "fact", "content": new[0] + " " + new[1], "name": "pair"}]
    rng.shuffle(items)
    # copies of this batch's own new notes, after them
    items += [{"kind": "fact", "content": _edited(text, rng)} for text in new[:3]]
    items += [{"kind": "fact", "content": text} for text in new[3:5]]
    items += [{"kind": "fact", "content": new[2] + " " + new[3], "name": "pair"}]
    return items


def _outcome(fabric: MemoryFabric) -> list[tuple[Any, ...]]:
    """Every row as the writes left it, without what differs run to run (ids, instants)."""
    with fabric.memory.store.read() as conn:
        rows = conn.execute(
            "SELECT n.kind, n.content, n.status, n.valid_to IS NULL, n.name = n.id, o.content "
            "FROM notes AS n LEFT JOIN notes AS o ON o.id = n.supersedes AND o.thread_id = n.thread_id "
            "WHERE n.thread_id = ?",
            (fabric.memory.scope.thread_id,),
        ).fetchall()
    return sorted(tuple(row) for row in rows)


@pytest.mark.parametrize("banded", [True, False], ids=["banded", "unbanded"])
def test_a_batch_leaves_the_store_as_its_notes_one_by_one_would(
    store_url: str, embedder: Any, banded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = _texts(60 if banded else 30, 1)
    items = _items(stored, 7)
    one_by_one = _fabric(store_url, embedder, "single")
    _seeded(one_by_one, stored, banded=banded)
    for item in items:
        one_by_one.remember(**item)
    together = _fabric(store_url, embedder, "batch")
    _seeded(together, stored, banded=banded)
    inserted: list[int] = []
    real = batch._inserted

    def counted(fabric: MemoryFabric, pending: Any, embeddings: Any) -> Any:
        inserted.append(len(pending))
        return real(fabric, pending, embeddings)

    monkeypatch.setattr(batch, "_inserted", counted)
    written = together.remember_many(items)
    assert len(written) == len(items)
    assert _outcome(together) == _outcome(one_by_one)
    # the 12 new facts, 4 procedures, 2 notes that must not fold and the first text of no word go in
    # together; the rest one by one
    assert sum(inserted) == 19, inserted
    for note, item in zip(written, items, strict=True):
        assert note.content == item["content"]
        assert note.kind == item["kind"]


def test_a_refusal_after_notes_went_in_together_takes_the_whole_batch_back(store_url: str, embedder: Any) -> None:
    fabric = _fabric(store_url, embedder, "main")
    stored = _texts(60, 1)
    _seeded(fabric, stored, banded=True)
    taken = fabric.remember(kind="fact", content="the deploy runbook lives in the wiki", name="runbook")
    before = _outcome(fabric)
    items: list[dict[str, Any]] = [{"kind": "fact", "content": text} for text in _texts(30, 9)]
    # an explicit id that names another note's name: refused while writing, after the notes before it
    items.append({"kind": "fact", "content": "the runbook moved", "id": "1" * 20, "name": "runbook"})
    with pytest.raises(MemoryConflictError, match=rf"^notes\[30\]: .*{taken.id}"):
        fabric.remember_many(items)
    assert _outcome(fabric) == before


def test_a_batch_of_new_notes_is_found_by_every_search(store_url: str, embedder: Any) -> None:
    fabric = _fabric(store_url, embedder, "main")
    _seeded(fabric, _texts(60, 1), banded=True)
    new = _texts(50, 4)
    written = fabric.remember_many([{"kind": "fact", "content": text} for text in new])
    assert [note.content for note in written] == new
    store, scope = fabric.memory.store, fabric.memory.scope
    for note in written[::7]:
        unique = note.content.split()[-1]
        found = fabric.recall(unique, top_k=3, scoring={"fusion": {"mode": "lexical"}})
        assert [hit.id for hit in found.hits][:1] == [note.id]
        assert store.band_candidates(scope, note.content) is not None
        assert note.id in {
            n.id for n in store.notes_by_rowid(scope, store.band_candidates(scope, note.content)).values()
        }
    again = fabric.remember_many([{"kind": "fact", "content": text} for text in new[:10]])
    assert [note.id for note in again] == [note.id for note in written[:10]]  # each folds into itself
