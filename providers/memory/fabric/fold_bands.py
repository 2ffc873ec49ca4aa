"""Consolidation's near-duplicate candidates from locality-sensitive hashing: SimHash bands of words.

A note's bag of words (the hash embedder's vector of its content, whatever embedder the store's recall
uses: the fold measures restatement by shared words), less its scope's centre, is signed against fixed
random hyperplanes (``BITS`` of them a band, ``BANDS`` bands); each band's bits are one key, kept as a
row ``(scope, band << BITS | key, note_rowid)`` of ``note_bands``, written in the note's own
transaction. Two vectors at an angle θ (after centring) agree on a bit with probability 1 − θ/π, so a
near-duplicate shares a whole band with one of them; a query also probes, in each band, the keys with
its ``FLIPS`` least certain bits turned (the signs nearest zero), which finds most of the pairs a band
misses at no cost in rows. The candidate search is then one index lookup a probe, flat in the store's
size, and every candidate is scored exactly, as before.

Why a centre: bags of words all share the common words, so they crowd one direction (unrelated notes
at cosine 0.44 of a 200-character corpus) and uncentred signs put most notes in a few keys. Around the
mean of the scope's first ``CENTRE_ROWS`` notes the same notes spread out: at 100k notes a query meets
~50 candidates instead of thousands. The centre is then fixed, so every process agrees on every key
(the hyperplanes come from a seeded PCG64, whose raw stream numpy keeps stable across versions).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .embedders import HashEmbedder, hash_tokens
from .rows import _scope_key
from .types import Scope

if TYPE_CHECKING:  # numpy loads with the first note banded: a store opened to list or read needs none
    import numpy as np
    import numpy.typing as npt

__all__ = ["BANDS", "BITS", "CENTRE_ROWS", "FLIPS", "MIN_THRESHOLD", "bag_blob", "bag_rows", "bags", "centre_of",
           "codes", "probes", "probes_many", "scope_code"]  # fmt: skip

# chosen on bench.engines' corpus (2,000 edited copies at 100k notes): 16 bands of 18 bits probing 2 flips
# a band found 2,000 (0 probes: 1,970) with ~50 candidates a query; 20 bits: 1,996 with ~22
BANDS = 16
BITS = 18
FLIPS = 2
_SEED = 20261204
# a scope takes its centre from this many notes; fewer, and the search by words costs no more than the bands
CENTRE_ROWS = 2_000
# the bands are tuned for the default threshold; a lower one (rare) is asked of the words or the vectors
MIN_THRESHOLD = 0.85
_BAGS = HashEmbedder()


def bags(texts: Sequence[str]) -> npt.NDArray[np.float64]:
    """Given notes' contents, return their bags of words (unit rows), as the bands take them."""
    import numpy as np

    return _BAGS.embed(texts).astype(np.float64)


def scope_code(scope: Scope) -> int:
    """Given a scope, return its 62-bit key in ``note_bands`` (two scopes that share one only share
    candidates, which the exact check then drops)."""
    name = "\x00".join(("afi-bands", *_scope_key(scope))).encode()
    return int.from_bytes(hashlib.blake2b(name, digest_size=8).digest(), "big") >> 2


@functools.lru_cache(maxsize=1)
def _planes() -> npt.NDArray[np.float64]:
    """The fixed Gaussian hyperplanes: (dims, BANDS * BITS), by Box-Muller from PCG64's raw stream
    (numpy's distributions may change between versions; the raw stream does not)."""
    import numpy as np

    count = _BAGS.dims * BANDS * BITS
    raw = np.random.PCG64(_SEED + _BAGS.dims).random_raw(count + count % 2)
    uniform = (raw >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
    radius = np.sqrt(-2.0 * np.log1p(-uniform[0::2]))
    angle = 2.0 * np.pi * uniform[1::2]
    normal = np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:count]
    return normal.reshape(_BAGS.dims, BANDS * BITS)


@functools.lru_cache(maxsize=1)
def _keys() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Each bit's weight in a band's key, and each band's base code."""
    import numpy as np

    return (1 << np.arange(BITS)).astype(np.int64), np.arange(BANDS, dtype=np.int64) << BITS


def _projections(rows: npt.NDArray[np.float64], centre: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    import numpy as np

    matrix = np.atleast_2d(rows)
    out: npt.NDArray[np.float64] = (matrix - centre) @ _planes()
    return out.reshape(len(matrix), BANDS, BITS)


def codes(rows: npt.NDArray[np.float64], centre: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """Given bags of words (n, dims) and their scope's centre, return each one's band codes (n, BANDS)."""
    import numpy as np

    weights, base = _keys()
    keys = (_projections(rows, centre) >= 0).astype(np.int64) @ weights
    out: npt.NDArray[np.int64] = keys + base
    return out


def probes(row: npt.NDArray[np.float64], centre: npt.NDArray[np.float64]) -> list[int]:
    """Given a query's bag of words and the scope's centre, return the codes to look up: each band's key
    and the keys with its ``FLIPS`` least certain bits turned, one at a time."""
    return probes_many(row, centre)[0]


def probes_many(rows: npt.NDArray[np.float64], centre: npt.NDArray[np.float64]) -> list[list[int]]:
    """:func:`probes` of each of several bags of words (n, dims), computed together."""
    import numpy as np

    weights, base = _keys()
    projected = _projections(rows, centre)
    keys = (projected >= 0).astype(np.int64) @ weights + base
    weakest = np.argsort(np.abs(projected), axis=2)[:, :, :FLIPS]
    flipped = keys[:, :, None] ^ (np.int64(1) << weakest)
    every = np.concatenate([keys, flipped.reshape(len(keys), -1)], axis=1)
    return [sorted(set(row.tolist())) for row in every]


def centre_of(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Given a scope's first notes' bags of words, return the centre its signs are taken around."""
    import numpy as np

    out: npt.NDArray[np.float64] = np.asarray(rows, dtype=np.float64).mean(axis=0)
    return out


def bag_blob(text: str) -> bytes | None:
    """Given a note's content, return its bag of words as kept in ``note_bags``: each slot of the hash
    embedder's vector the text fills and its count, as little-endian 16-bit pairs in slot order (a text
    of no word: slot 0 once, as the embedder gives it); None for a count past 16 bits (that note's
    text is read instead)."""
    counts: dict[int, int] = {}
    for token in hash_tokens(text) or [""]:
        slot = _BAGS._slot(token) if token else 0
        counts[slot] = counts.get(slot, 0) + 1
    if max(counts.values()) > 0xFFFF:
        return None
    return b"".join(slot.to_bytes(2, "little") + count.to_bytes(2, "little") for slot, count in sorted(counts.items()))


def bag_rows(blobs: Sequence[bytes]) -> npt.NDArray[np.float32]:
    """Given bags as :func:`bag_blob` keeps them, return them as the hash embedder's unit rows (n, dims)."""
    import numpy as np

    out = np.zeros((len(blobs), _BAGS.dims), dtype=np.float32)
    if not blobs:
        return out
    pairs = np.frombuffer(b"".join(blobs), dtype="<u2").reshape(-1, 2)
    rows = np.repeat(np.arange(len(blobs)), [len(blob) // 4 for blob in blobs])
    out[rows, pairs[:, 0]] = pairs[:, 1]
    out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), np.float32(1e-12))
    return out
