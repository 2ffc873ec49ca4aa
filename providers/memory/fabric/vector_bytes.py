"""How an embedding is kept on disk in a SQLite store: half precision, and sparse when that is smaller.

Both engines keep each component at half precision (IEEE binary16; PostgreSQL's column is pgvector's
``halfvec``, or ``sparsevec`` for the hash embedder), so a copy between them is exact and a vector
scores the same on either. A row is written in whichever of two forms is smaller:

- **sparse** (``b"s"``, the dims, then the indexes of the non-zero components, as little-endian
  ``uint16``, and their values as ``float16``): the hash embedder's rows hold about 21 non-zero
  components of 384, 87 bytes instead of 1,536;
- **dense** (``b"h"``, then every component as ``float16``): a model's rows, 769 bytes at 384 dims.

Stores written before this kept raw ``float32`` bytes. Those blobs have an even length (4 × dims) and
every tagged blob an odd one (3 + 4k or 1 + 2 × dims), so both are read without a migration.
Half precision moves a unit vector's dot products by about 0.0005: far below any threshold the fabric
uses (folding asks for 0.85).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["checked_blob", "pack_vector", "unpack_vector"]

SPARSE, DENSE = b"s", b"h"
_INDEX, _VALUE = np.dtype("<u2"), np.dtype("<f2")


def pack_vector(vector: npt.ArrayLike) -> bytes:
    """Given an embedding, return its smaller tagged form (its dims must fit ``uint16`` indexes)."""
    values = np.asarray(vector, dtype=np.float32).astype(_VALUE)
    nonzero = np.flatnonzero(values)
    if 2 + 4 * nonzero.size < 2 * values.size:
        head = np.array([values.size], dtype=_INDEX).tobytes()
        return SPARSE + head + nonzero.astype(_INDEX).tobytes() + values[nonzero].tobytes()
    return DENSE + values.tobytes()


def unpack_vector(blob: bytes | memoryview) -> npt.NDArray[np.float32]:
    """Given a stored blob (tagged, or a legacy raw ``float32`` row), return the ``float32`` vector."""
    raw = bytes(blob)
    if len(raw) % 2 == 0:
        return np.frombuffer(raw, dtype=np.float32).copy()
    tag, body = raw[:1], raw[1:]
    if tag == DENSE:
        return np.frombuffer(body, dtype=_VALUE).astype(np.float32)
    if tag != SPARSE or len(body) % 4 != 2:
        raise ValueError(f"an embedding blob of {len(raw)} bytes is in no known form")
    count = (len(body) - 2) // 4
    out = np.zeros(int(np.frombuffer(body[:2], dtype=_INDEX)[0]), dtype=np.float32)
    indexes = np.frombuffer(body[2 : 2 + 2 * count], dtype=_INDEX)
    out[indexes] = np.frombuffer(body[2 + 2 * count :], dtype=_VALUE)
    return out


def checked_blob(raw: bytes, dims: int) -> bytes | None:
    """Given a blob from elsewhere (a peer's), return it as this store keeps it when it holds ``dims``
    finite components: a tagged form as it is (its values read in place, no vector built), a legacy
    ``float32`` one packed; None when it holds another vector. ValueError when it is in no known form."""
    tag, body = raw[:1], raw[1:]
    if len(raw) % 2 == 0 or tag not in (SPARSE, DENSE):
        vector = unpack_vector(raw)
        return pack_vector(vector) if vector.shape == (dims,) and np.isfinite(vector).all() else None
    if tag == DENSE:
        if len(body) != 2 * dims:
            return None
        values = np.frombuffer(body, dtype=_VALUE)
    else:
        if len(body) % 4 != 2:
            raise ValueError(f"an embedding blob of {len(raw)} bytes is in no known form")
        count = (len(body) - 2) // 4
        indexes = np.frombuffer(body[2 : 2 + 2 * count], dtype=_INDEX)
        if int.from_bytes(body[:2], "little") != dims or (count and int(indexes.max()) >= dims):
            return None
        values = np.frombuffer(body[2 + 2 * count :], dtype=_VALUE)
    return raw if np.isfinite(values).all() else None
