from __future__ import annotations

import numpy as np
import pytest

from afi.providers.memory import Embedder, HashEmbedder, MemoryValidationError, OnnxMiniLM, embedder_from_name


def test_hash_embedder_rows_are_unit_float32_and_deterministic() -> None:
    emb = HashEmbedder()
    out = emb.embed(["User prefers metric units", "", "!!!"])
    assert out.shape == (3, 384)
    assert out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0)
    again = HashEmbedder().embed(["User prefers metric units"])
    assert np.array_equal(out[0], again[0])
    assert emb.name == "hash-fnv1a-384"
    assert isinstance(emb, Embedder)


def test_hash_embedder_is_a_bag_of_lowercase_tokens() -> None:
    emb = HashEmbedder(dims=64)
    a, b, c = emb.embed(["Deploy via Canary", "canary, via deploy!", "rollback now"])
    assert float(a @ b) == pytest.approx(1.0)
    assert float(a @ c) < 0.9
    assert emb.name == "hash-fnv1a-64"


@pytest.mark.parametrize("dims", [0, -1, 5000, True])
def test_hash_embedder_refuses_bad_dims(dims: int) -> None:
    with pytest.raises(MemoryValidationError):
        HashEmbedder(dims=dims)


def test_embedders_by_name_are_the_sentence_model_and_the_hash() -> None:
    minilm = embedder_from_name("minilm")
    assert isinstance(minilm, OnnxMiniLM) and (minilm.name, minilm.dims) == ("minilm-l6-v2-int8", 384)
    hashed = embedder_from_name("hash")
    assert isinstance(hashed, HashEmbedder) and hashed.name == "hash-fnv1a-384"


@pytest.mark.parametrize("name", ["bert", "auto", "MiniLM", "", None])
def test_an_unknown_embedder_name_is_refused_listing_the_known_ones(name: str) -> None:
    with pytest.raises(MemoryValidationError, match=r"unknown embedder .*: use 'minilm' or 'hash'"):
        embedder_from_name(name)
