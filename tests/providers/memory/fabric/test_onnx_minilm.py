"""The sentence embedder of the default install: all-MiniLM-L6-v2 (int8 ONNX, the real weights) on onnxruntime."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from afi.providers.memory import Embedder, HashEmbedder, MemoryValidationError, OnnxMiniLM
from afi.providers.memory.fabric.onnx_minilm import (
    MODEL_SHA256,
    MODEL_SIZE,
    default_model_path,
    onnx_available,
)
from afi.providers.memory.fabric.wordpiece import WordPiece

LONG = " ".join(f"word{i} of a long note about deploys, rollbacks and the canary" for i in range(60))
# Texts of every kind a note holds: short, over 256 tokens, empty, emoji, CJK, control and zero-width characters.
AWKWARD = [
    "User prefers metric units",
    LONG,
    "",
    "ship it 🚀🚀 today 👍🏽",
    "東京タワーは高い and 서울 is far",
    "bell\x07 nul\x00 zero\u200bwidth\ttab\u2028line",
    "Crème brûlée, naïve café",
    "a[SEP]b [MASK]",
    "x" * 300,
    "Deploy via canary first, then watch the error budget for an hour",
    "?",
]


@pytest.fixture(scope="module")
def minilm() -> OnnxMiniLM:
    return OnnxMiniLM()


def _cosine(vectors: Any, a: int, b: int) -> float:
    return float(vectors[a] @ vectors[b])


def test_the_model_and_its_runtime_are_installed_by_default() -> None:
    assert onnx_available()
    path = default_model_path()
    assert path.name == "model.onnx" and path.stat().st_size == MODEL_SIZE


def test_embeds_unit_rows_of_384_float32(minilm: OnnxMiniLM) -> None:
    vectors = minilm.embed(["User prefers metric units", "Deploy via canary first", "a third one"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert (minilm.name, minilm.dims) == ("minilm-l6-v2-int8", 384)
    assert isinstance(minilm, Embedder) and minilm.loaded


def test_the_same_texts_give_the_same_vectors(minilm: OnnxMiniLM) -> None:
    texts = ["User prefers metric units", "Deploy via canary first"]
    first = minilm.embed(texts)
    again = OnnxMiniLM().embed(texts)
    np.testing.assert_array_equal(first, again)


def test_meaning_that_shared_words_cannot_show(minilm: OnnxMiniLM) -> None:
    # No word in common anywhere, so the hash embedder scores every pair 0: only a model ranks them.
    texts = [
        "car",
        "vehicle",
        "banana",
        "Which temperature scale does the user like?",
        "They want degrees shown in Celsius",
        "Bananas ripen faster next to apples",
    ]
    vectors = minilm.embed(texts)
    assert _cosine(vectors, 0, 1) > _cosine(vectors, 0, 2) + 0.1
    assert _cosine(vectors, 3, 4) > _cosine(vectors, 3, 5) + 0.1
    hashed = HashEmbedder().embed(texts)
    assert _cosine(hashed, 0, 1) == _cosine(hashed, 0, 2) == 0.0
    assert _cosine(hashed, 3, 4) == _cosine(hashed, 3, 5) == 0.0


def test_a_batch_gives_each_text_the_vector_it_gets_alone(minilm: OnnxMiniLM) -> None:
    """Eleven texts of very different lengths: two inner batches, sorted by length, padded."""
    batch = minilm.embed(AWKWARD)
    alone = np.vstack([minilm.embed([text]) for text in AWKWARD])
    np.testing.assert_allclose(batch, alone, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    assert len({row.tobytes() for row in batch}) == len(AWKWARD), "every text has its own vector"


def test_a_text_is_read_up_to_256_tokens(minilm: OnnxMiniLM) -> None:
    """Two texts that differ only after their first 254 word pieces embed alike; before it, they differ."""
    tokenizer = WordPiece.bert_uncased(max_length=4096)
    assert len(tokenizer.encode(LONG)) > 300
    after, before = minilm.embed([LONG + " bananas", LONG.replace("word0 ", "bananas ", 1)])
    (plain,) = minilm.embed([LONG])
    np.testing.assert_allclose(after, plain, atol=1e-6)
    assert float(before @ plain) < 0.999


def test_empty_input_is_an_empty_matrix_and_loads_nothing(tmp_path: Path) -> None:
    embedder = OnnxMiniLM(model_path=tmp_path / "absent.onnx")
    empty = embedder.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    assert not embedder.loaded


def _damaged(tmp_path: Path, offset: int) -> tuple[Path, str]:
    """A copy of the model with one bit flipped at ``offset``; return it and its SHA-256."""
    copy = tmp_path / "model.onnx"
    shutil.copyfile(default_model_path(), copy)
    with open(copy, "r+b") as stream:
        stream.seek(offset)
        byte = stream.read(1)[0]
        stream.seek(offset)
        stream.write(bytes([byte ^ 0x01]))
    return copy, hashlib.sha256(copy.read_bytes()).hexdigest()


@pytest.mark.parametrize("offset", [MODEL_SIZE // 2, MODEL_SIZE - 1], ids=["middle", "last byte"])
def test_a_damaged_model_file_is_refused_naming_it_and_both_digests(tmp_path: Path, offset: int) -> None:
    copy, found = _damaged(tmp_path, offset)
    embedder = OnnxMiniLM(model_path=copy)
    for _ in range(2):  # refused again: a refusal is not remembered as a load
        with pytest.raises(MemoryValidationError) as refused:
            embedder.embed(["hello"])
        message = str(refused.value)
        assert str(copy) in message and MODEL_SHA256 in message and found in message
        assert not embedder.loaded


def test_a_truncated_model_file_is_refused_naming_its_size(tmp_path: Path) -> None:
    short = tmp_path / "model.onnx"
    with open(default_model_path(), "rb") as stream:
        short.write_bytes(stream.read(4096))
    with pytest.raises(MemoryValidationError, match=r"size 4,096 bytes, expected 22,928,619") as refused:
        OnnxMiniLM(model_path=short).embed(["hello"])
    assert hashlib.sha256(short.read_bytes()).hexdigest() in str(refused.value)


def test_a_missing_model_file_is_refused_at_the_first_embed(tmp_path: Path) -> None:
    embedder = OnnxMiniLM(model_path=tmp_path / "absent.onnx")
    with pytest.raises(MemoryValidationError, match=r"absent\.onnx cannot be read"):
        embedder.embed(["hello"])
