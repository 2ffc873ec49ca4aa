"""Embedders: the protocol the fabric embeds through, the text a note is embedded from, the
deterministic hash embedder, and the choice by name.

The store records the embedder's ``name`` and ``dims``; opening a store with another embedder
is refused, so vectors from two models never mix in one index (``afi db reembed`` moves a store's
vectors to another embedder, :mod:`.reembed`). The sentence embedder (all-MiniLM-L6-v2 on
onnxruntime) is :class:`.onnx_minilm.OnnxMiniLM`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .errors import MemoryValidationError
from .onnx_minilm import OnnxMiniLM

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .types import MemoryNote

__all__ = ["EMBEDDERS", "Embedder", "HashEmbedder", "bags_of_words", "embedder_from_name", "embedding_text",
           "hash_tokens"]  # fmt: skip

# letters and digits of any script, no underscore: for ASCII exactly [a-z0-9]+ after lowercasing
_TOKEN = re.compile(r"[^\W_]+")
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows; ``name`` is the stable id the store records."""

    name: str
    dims: int

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


def embedding_text(note: MemoryNote) -> str:
    """Given a note, return the text its vector is the embedding of: its content, as stored (redacted).

    Every writer of a note's vector embeds this (a remember, a bundle's import, ``afi db reembed``), so a
    store re-embedded holds the vectors a store written with that embedder from the start holds.
    """
    return note.content


def bags_of_words(embedder: Embedder) -> bool:
    """Whether the embedder's rows are bags of words (the hash embedder's), whose cosine is how much two
    texts share their words; a sentence embedder's cosine is how near their meanings are."""
    return embedder.name.startswith("hash-")


def hash_tokens(text: str) -> list[str]:
    """Given text, return its lowercase alphanumeric tokens, any script (the hash embedder's bag)."""
    return _TOKEN.findall(text.lower())


@functools.lru_cache(maxsize=1 << 16)  # the hot vocabulary; ~9 MB at most, shared by every embedder
def _fnv1a(token: str) -> int:
    value = _FNV_OFFSET
    for byte in token.encode("utf-8"):
        value = ((value ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return value


class HashEmbedder:
    """FNV-1a bag of lowercase tokens, L2-normalised; deterministic, offline, no model.

    A text without tokens embeds to the first unit vector, so every row has norm 1.
    """

    def __init__(self, dims: int = 384) -> None:
        if not isinstance(dims, int) or isinstance(dims, bool) or not 1 <= dims <= 4096:
            raise MemoryValidationError("HashEmbedder dims must be an integer in 1..4096")
        self.dims = dims
        self.name = f"hash-fnv1a-{dims}"

    def _slot(self, token: str) -> int:
        return _fnv1a(token) % self.dims

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Given texts, return an (n, dims) float32 matrix of L2-normalised rows."""
        import numpy as np  # at the first text embedded: opening a memory to list or read it needs no numpy

        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = hash_tokens(text)
            if not tokens:
                out[row, 0] = 1.0
                continue
            for token in tokens:
                out[row, self._slot(token)] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= norms
        return out


# The embedders a host can name: the sentence model, and the hash embedder (no model, deterministic).
EMBEDDERS: dict[str, Callable[[], Embedder]] = {"minilm": OnnxMiniLM, "hash": HashEmbedder}


def embedder_from_name(name: str) -> Embedder:
    """Given ``"minilm"`` (all-MiniLM-L6-v2 on onnxruntime) or ``"hash"``, return a new embedder of that kind.

    Raises:
        MemoryValidationError: an unknown name (the message lists the known ones).
    """
    make = EMBEDDERS.get(name) if isinstance(name, str) else None
    if make is None:
        raise MemoryValidationError(f"unknown embedder {name!r}: use {' or '.join(map(repr, EMBEDDERS))}")
    return make()
