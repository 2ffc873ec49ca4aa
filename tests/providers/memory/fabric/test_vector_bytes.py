"""Embeddings on disk: half precision, sparse when smaller, and the old raw float32 rows still read."""

from __future__ import annotations

import numpy as np
import pytest

from afi.providers.memory import HashEmbedder
from afi.providers.memory.fabric.vector_bytes import DENSE, SPARSE, checked_blob, pack_vector, unpack_vector


def _unit(rng: np.random.Generator, dims: int) -> np.ndarray:
    row = rng.normal(size=dims).astype(np.float32)
    return row / np.linalg.norm(row)


def test_a_hash_embedders_row_is_kept_sparse_in_under_a_hundred_bytes() -> None:
    embedder = HashEmbedder()
    rows = embedder.embed(["the canary deploy rolls out to one region first, then to the rest " * 2, "x", ""])
    for row in rows:
        blob = pack_vector(row)
        assert blob[:1] == SPARSE and len(blob) < 100
        back = unpack_vector(blob)
        assert back.shape == (384,) and np.flatnonzero(back).tolist() == np.flatnonzero(row).tolist()
        assert float(back @ row) == pytest.approx(1.0, abs=1e-3)


def test_a_dense_row_is_kept_at_half_precision() -> None:
    rng = np.random.default_rng(3)
    for dims in (1, 7, 384, 1024):
        row = _unit(rng, dims)
        blob = pack_vector(row)
        assert blob[:1] == DENSE and len(blob) == 1 + 2 * dims
        back = unpack_vector(blob)
        assert back.dtype == np.float32 and np.abs(back - row).max() < 1e-3
        assert pack_vector(back) == blob  # half precision survives a second trip exactly


def test_every_form_round_trips_over_random_rows() -> None:
    rng = np.random.default_rng(11)
    tried = failed = 0
    for _ in range(500):
        dims = int(rng.integers(1, 600))
        row = _unit(rng, dims)
        row[rng.random(dims) < rng.random()] = 0.0  # from dense to nearly empty
        back = unpack_vector(pack_vector(row))
        tried += 1
        failed += int(back.shape != row.shape or np.abs(back - row).max() > 1e-3)
    assert (tried, failed) == (500, 0)


def test_an_old_stores_raw_float32_row_reads_as_it_was() -> None:
    row = _unit(np.random.default_rng(5), 384)
    assert unpack_vector(row.tobytes()).tolist() == row.tolist()
    assert unpack_vector(memoryview(row.tobytes())).tolist() == row.tolist()


@pytest.mark.parametrize("blob", [b"x" + bytes(8), b"s" + bytes(4), b"q"])
def test_a_blob_in_no_known_form_is_refused(blob: bytes) -> None:
    with pytest.raises(ValueError, match="no known form"):
        unpack_vector(blob)


def test_a_blob_from_elsewhere_is_kept_as_sent_when_it_holds_a_vector_of_the_dims() -> None:
    rng = np.random.default_rng(5)
    sparse, dense = pack_vector(HashEmbedder().embed(["a peer's note"])[0]), pack_vector(_unit(rng, 384))
    assert checked_blob(sparse, 384) is sparse and checked_blob(dense, 384) is dense
    legacy = _unit(rng, 384)
    assert checked_blob(legacy.tobytes(), 384) == pack_vector(legacy)  # raw float32: kept at half precision
    inf = DENSE + np.full(384, np.inf, dtype="<f2").tobytes()
    past = SPARSE + np.array([384, 999], dtype="<u2").tobytes() + np.array([1.0], dtype="<f2").tobytes()
    nan = SPARSE + np.array([384, 3], dtype="<u2").tobytes() + np.array([np.nan], dtype="<f2").tobytes()
    for other in (dense[:-2], sparse.replace(b"\x80\x01", b"\x81\x01", 1), inf, past, nan, legacy.tobytes()[:-4]):
        assert checked_blob(other, 384) is None, other[:8]
    for broken in (b"s\x00\x00\x00\x00", b"x\x00\x00", b"\x00"):
        with pytest.raises(ValueError):
            checked_blob(broken, 384)
