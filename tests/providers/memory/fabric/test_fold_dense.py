"""A store of a sentence embedder folds by the words, as a store of the hash embedder does.

A sentence embedder puts "my sister lives in Paris" and "my sister lives in Rome" close together: they
speak of the same thing. Folding one into the other would retire a fact the user still holds, so the
fold reads the bags of words whichever embedder recall uses. The embedder here is dense and puts every
text nearly on one line (cosine above 0.999 between any two), the worst case for a fold by vectors.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt
import pytest

from afi.providers.memory import HashEmbedder, MemoryFabric, create_memory, create_memory_fabric
from afi.providers.memory.fabric.embedders import Embedder, bags_of_words


class NearlyOneLine:
    """A dense embedder under which every two texts have a cosine above 0.999."""

    name = "test-one-line-16"
    dims = 16

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            noise = np.random.default_rng(zlib.crc32(text.encode())).standard_normal(self.dims - 1)
            out[row, 0] = 1.0
            out[row, 1:] = 0.005 * noise
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


SISTER_PARIS = "My sister Anna moved to Paris for her job at the observatory"
SISTER_ROME = "My brother Luca lives in Rome and teaches music there"
RESTATED = "My sister Anna moved to Paris for her new job at the observatory"  # one word more


def _fabric(store_url: str, embedder: Embedder, thread: str) -> MemoryFabric:
    return create_memory_fabric(create_memory(store_url, tenant_id="t", resource_id="r", thread_id=thread,
                                              embedder=embedder))  # fmt: skip


@pytest.fixture
def dense(store_url: str) -> Iterator[MemoryFabric]:
    fabric = _fabric(store_url, NearlyOneLine(), "dense")
    yield fabric
    fabric.memory.close()


def test_the_dense_test_embedder_would_fold_everything_by_vectors() -> None:
    vectors = NearlyOneLine().embed([SISTER_PARIS, SISTER_ROME])
    assert float(vectors[0] @ vectors[1]) > 0.999 and not bags_of_words(NearlyOneLine())
    assert bags_of_words(HashEmbedder())


def test_two_facts_on_one_subject_both_stay_current(dense: MemoryFabric) -> None:
    paris = dense.remember(kind="fact", content=SISTER_PARIS)
    rome = dense.remember(kind="fact", content=SISTER_ROME)
    assert rome.supersedes is None and rome.id != paris.id
    assert {note.id for note in dense.notes()} == {paris.id, rome.id}


def test_a_restatement_folds_and_the_same_words_update_in_place(dense: MemoryFabric) -> None:
    first = dense.remember(kind="fact", content=SISTER_PARIS, tags=["family"])
    again = dense.remember(kind="fact", content=SISTER_PARIS.upper())
    assert again.id == first.id and again.tags == ["family"]
    time.sleep(0.002)  # a version superseded in its own millisecond shows at no instant
    restated = dense.remember(kind="fact", content=RESTATED)
    assert restated.supersedes == first.id
    assert [note.id for note in dense.notes()] == [restated.id]


SEQUENCE = [
    SISTER_PARIS,
    SISTER_ROME,
    RESTATED,
    "The deploy dashboard for checkout lives at grafana board seven",
    "The deploy dashboard for checkout lives at grafana board nine",
    "User prefers metric units",
    "user prefers metric units!",
    "Tea, not coffee, after four in the afternoon",
    "My brother Luca lives in Rome and teaches piano there",
]


def test_a_dense_store_folds_as_a_hash_store_does(two_stores: tuple[str, str]) -> None:
    """The same writes give the same notes, the same supersessions and the same current set."""
    shapes = []
    for url, embedder in zip(two_stores, (HashEmbedder(), NearlyOneLine()), strict=True):
        fabric = _fabric(url, embedder, "t1")
        try:
            for content in SEQUENCE:
                fabric.remember(kind="fact", content=content)
                time.sleep(0.002)
            notes = fabric.notes(include_invalid=True)
            content_of = {note.id: note.content for note in notes}
            shapes.append(sorted((note.content, content_of.get(note.supersedes or ""), note.valid_to is None)
                                 for note in notes))  # fmt: skip
        finally:
            fabric.memory.close()
    assert shapes[0] == shapes[1]
    assert sum(current for _, _, current in shapes[1]) == 5, shapes[1]
