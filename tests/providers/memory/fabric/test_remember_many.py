"""A many-note remember: one transaction, one embedding call, the folds of single remembers, all or nothing."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from afi.providers.memory import (
    HashEmbedder,
    MemoryConflictError,
    MemoryFabric,
    MemoryLimitError,
    MemoryValidationError,
    create_memory,
    create_memory_fabric,
)
from afi.providers.memory.fabric.batch import MAX_BATCH_BYTES, MAX_BATCH_NOTES

DEPLOY = "the deploy of service alpha runs every friday at noon in region west after review"
# one word of fourteen changed: a near-duplicate (cosine 13/14), so it supersedes DEPLOY
DEPLOY_MONDAY = DEPLOY.replace("friday", "monday")
UNITS = "the user prefers metric units and a dark theme in every dashboard"
RUNBOOK = "restart the ingest worker with systemctl then check the queue depth on grafana"

# a burst as an agent writes it: new notes, a near-duplicate, an exact restatement, a name written
# twice, notes of another kind, and a restatement of a note stored before the burst
BURST: list[dict[str, Any]] = [
    {"kind": "fact", "content": DEPLOY, "tags": ["ops"]},
    {"kind": "fact", "content": UNITS},
    {"kind": "procedure", "content": RUNBOOK, "name": "restart-ingest"},
    {"kind": "fact", "content": DEPLOY_MONDAY, "keywords": ["deploy"]},
    {"kind": "fact", "content": UNITS.upper(), "tags": ["prefs"]},
    {"kind": "procedure", "content": RUNBOOK + " twice", "name": "restart-ingest"},
    {"kind": "fact", "content": "the staging database lives on host db-7 in the basement rack"},
    {"kind": "fact", "content": "the staging database lives on host db-7 in the basement rack"},
    {"kind": "fact", "content": "an unrelated note about lunch options near the office on tuesdays"},
]
STORED_BEFORE = {"kind": "fact", "content": "the on call rotation changes every monday at nine in the morning"}
RESTATED = {"kind": "fact", "content": "The on call rotation changes every Monday at nine in the morning!"}


class CountingEmbedder:
    """The hash embedder, counting the calls and texts it is handed (how the batch embeds)."""

    def __init__(self) -> None:
        self._inner = HashEmbedder()
        self.name, self.dims = self._inner.name, self._inner.dims
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls.append(len(texts))
        return self._inner.embed(texts)


def _fabric(url: str, **kw: Any) -> MemoryFabric:
    return create_memory_fabric(create_memory(url, tenant_id="acme", resource_id="user-1", thread_id="t1", **kw))


@pytest.fixture
def fabric(store_url: str) -> Iterator[MemoryFabric]:
    made = _fabric(store_url)
    yield made
    made.memory.close()


def _shape(fabric: MemoryFabric, written: list[Any]) -> dict[str, Any]:
    """What a sequence of writes left, without the ids and instants that differ run to run."""
    current = fabric.notes(kinds=["fact", "procedure"])
    every = fabric.notes(kinds=["fact", "procedure"], include_invalid=True)
    by_id = {note.id: note for note in every}
    position = {note.id: i for i, note in reversed(list(enumerate(written)))}  # the first write of each row
    return {
        "current": sorted((n.kind, n.content, n.name == n.id, sorted(n.tags), sorted(n.keywords)) for n in current),
        "rows": len(every),
        # which write each returned note stands for (the same row as an earlier write: a fold)
        "returned": [position[note.id] for note in written],
        "superseded": sorted(
            (position.get(n.id), position.get(by_id[n.supersedes].id)) for n in every if n.supersedes is not None
        ),
    }


def test_a_batch_folds_as_the_same_notes_remembered_one_by_one(two_stores: tuple[str, str]) -> None:
    one_by_one, batched = (_fabric(url) for url in two_stores)
    try:
        for fabric in (one_by_one, batched):
            fabric.remember(**STORED_BEFORE)
        singles = [one_by_one.remember(**item) for item in [*BURST, RESTATED]]
        batch = batched.remember_many([*BURST, RESTATED])
        assert [note.kind for note in batch] == [note.kind for note in singles]
        assert _shape(batched, batch) == _shape(one_by_one, singles)
        # the folds the equivalence stands on did happen
        assert batch[3].supersedes == batch[0].id and batch[3].keywords == ["deploy"]
        assert batch[4].id == batch[1].id and batch[4].tags == ["prefs"]
        assert batch[5].supersedes == batch[2].id and batch[5].name == "restart-ingest"
        assert batch[7].id == batch[6].id
        assert batch[9].content == RESTATED["content"] and batch[9].created_at < batch[0].created_at
    finally:
        one_by_one.memory.close()
        batched.memory.close()


def test_a_batch_is_embedded_in_one_call(store_url: str) -> None:
    embedder = CountingEmbedder()
    fabric = _fabric(store_url, embedder=embedder)
    try:
        written = fabric.remember_many(BURST)
        assert embedder.calls == [len(BURST)]
        hits = fabric.recall("staging database host", top_k=1).hits
        assert hits and hits[0].id == written[6].id
    finally:
        fabric.memory.close()


def test_a_batch_returns_its_notes_in_order_and_recall_finds_them(fabric: MemoryFabric) -> None:
    items = [{"kind": "fact", "content": f"service {i} runs in region {i * 37 % 101} on rack {i}"} for i in range(50)]
    written = fabric.remember_many(items)
    assert [note.content for note in written] == [item["content"] for item in items]
    assert len({note.id for note in written}) == 50
    assert len(fabric.notes()) == 50
    hit = fabric.recall("service 17 rack 17", top_k=1).hits
    assert hit and hit[0].id == written[17].id
    assert fabric.remember_many([]) == []


@pytest.mark.parametrize(
    ("bad", "error", "says"),
    [
        pytest.param({"kind": "fact", "content": "x", "importance": 7}, MemoryValidationError, "importance",
                     id="bad-field"),
        pytest.param({"kind": "fact", "content": "y" * 5000}, MemoryLimitError, "4000", id="too-long"),
        pytest.param({"kind": "fact", "content": "z", "colour": "red"}, MemoryValidationError, "colour",
                     id="unknown-field"),
        pytest.param({"kind": "working", "block": "todo", "content": "w"}, MemoryValidationError, "on its own",
                     id="working"),
        pytest.param({"kind": "memo", "content": "m"}, MemoryValidationError, "kind", id="unknown-kind"),
        pytest.param("just text", MemoryValidationError, "mapping", id="not-a-mapping"),
    ],
)  # fmt: skip
def test_one_bad_note_refuses_the_batch_naming_it(fabric: MemoryFabric, bad: Any, error: type[Exception],
                                                  says: str) -> None:  # fmt: skip
    fabric.remember(kind="fact", content="a note stored before")
    seq = fabric.change_seq()
    with pytest.raises(error, match=rf"^notes\[2\]: .*{says}"):
        fabric.remember_many([BURST[0], BURST[1], bad, BURST[2]])
    assert fabric.change_seq() == seq
    assert [note.content for note in fabric.notes(include_invalid=True)] == ["a note stored before"]


def test_a_refusal_met_while_writing_rolls_the_whole_batch_back(fabric: MemoryFabric) -> None:
    held = fabric.remember(kind="fact", content="the pager rota", name="pager")
    seq = fabric.change_seq()
    taken = {"kind": "fact", "content": "another text", "id": "0123456789ab", "name": "pager"}
    with pytest.raises(MemoryConflictError, match=r"^notes\[3\]: the fact name 'pager' is held"):
        fabric.remember_many([BURST[0], BURST[1], BURST[3], taken])
    assert fabric.change_seq() == seq
    assert [note.id for note in fabric.notes(include_invalid=True)] == [held.id]
    # the index the failed batch's folds read forgets its rows: the next write folds into what is stored
    again = fabric.remember_many([BURST[0]])
    assert again[0].supersedes is None and len(fabric.notes()) == 2


def test_a_batch_over_the_note_count_is_refused(fabric: MemoryFabric) -> None:
    items = [{"kind": "fact", "content": f"n{i}"} for i in range(MAX_BATCH_NOTES + 1)]
    with pytest.raises(MemoryLimitError, match=f"at most {MAX_BATCH_NOTES:,} notes"):
        fabric.remember_many(items)
    assert fabric.notes() == []
    assert len(fabric.remember_many(items[:MAX_BATCH_NOTES])) == MAX_BATCH_NOTES


def test_a_batch_over_the_byte_cap_is_refused(fabric: MemoryFabric) -> None:
    # each under the note cap of 4,000 characters, together over the batch's bytes
    item = {"kind": "fact", "content": "\N{GRINNING FACE}" * 3_900}  # 4 bytes a character in UTF-8
    count = MAX_BATCH_BYTES // (4 * 3_900) + 1
    assert count <= MAX_BATCH_NOTES  # the bytes refuse it, not the count
    with pytest.raises(MemoryLimitError, match="bytes"):
        fabric.remember_many([item] * count)
    assert fabric.notes() == []


def test_a_batch_that_is_not_a_list_is_refused(fabric: MemoryFabric) -> None:
    with pytest.raises(MemoryValidationError, match="list of notes"):
        fabric.remember_many("remember this")
