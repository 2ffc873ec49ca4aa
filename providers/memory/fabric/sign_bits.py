"""A first cut for a large dense scope's vector search: rows ranked by the Hamming distance of their signs.

Scoring every dense row exactly is one matvec over the scope's matrix: about 20 ms at 100k rows of a
384-dimension sentence embedder and 130 ms at a million on 2 cores, linear. Past ``PREFILTER_ROWS``
rows the index keeps each row's sign bits around the rows' mean (sentence vectors share a common
direction: uncentred, most rows would agree on most bits), packed 64 to a word and stored word by
word, so a query's distance to every row is a few XORs and popcounts over contiguous arrays (a
million rows in about 11 ms). The ``max(limit * OVERSAMPLE, CANDIDATES)`` rows nearest by that
distance are then scored exactly, and the best of them returned.

Approximate: a row among the exact top ``limit`` is missed only when more than that many rows beat it
on the signs. The centre is the mean of the rows when the bits were first built; rows added later
are signed around the same centre, and a full reload of the index builds them again.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["CANDIDATES", "OVERSAMPLE", "PREFILTER_ROWS", "SignBits"]

# scopes with fewer dense rows are scored exactly (a matvec of a few milliseconds)
PREFILTER_ROWS = 50_000
OVERSAMPLE = 20
CANDIDATES = 2_000


def _packed(rows: npt.NDArray[np.float32], words: int) -> npt.NDArray[np.uint64]:
    """Given rows (n, dims), return their sign bits (positive: 1) as (words, n) uint64."""
    bits = np.packbits(rows > 0, axis=1, bitorder="little")
    padded = np.zeros((len(rows), words * 8), dtype=np.uint8)
    padded[:, : bits.shape[1]] = bits
    return np.ascontiguousarray(padded.view(np.uint64).T)


class SignBits:
    """The sign bits of one index's rows (slots), kept in step with its matrix once built."""

    def __init__(self, dims: int) -> None:
        self.words = (dims + 63) // 64
        self.bits: npt.NDArray[np.uint64] | None = None  # (words, capacity); None: not built
        self.centre: npt.NDArray[np.float32] | None = None

    def forget(self) -> None:
        """Drop the bits (the index was reloaded): the next search builds them again."""
        self.bits = None
        self.centre = None

    def build(self, matrix: npt.NDArray[np.float32], vectored: npt.NDArray[np.bool_], size: int) -> None:
        """Sign every slot below ``size`` around the mean of the slots that hold a vector."""
        held = matrix[:size][vectored[:size]]
        self.centre = held.mean(axis=0).astype(np.float32) if len(held) else np.zeros(matrix.shape[1], np.float32)
        self.bits = np.zeros((self.words, matrix.shape[0]), dtype=np.uint64)
        for start in range(0, size, 65_536):  # in slices: the centred copy of a million rows is 1.5 GB
            stop = min(start + 65_536, size)
            self.bits[:, start:stop] = _packed(matrix[start:stop] - self.centre, self.words)

    def put(self, slot: int, vector: npt.NDArray[np.float32], capacity: int) -> None:
        """Sign one slot's new vector (a no-op before the bits are built)."""
        if self.bits is None or self.centre is None:
            return
        if capacity > self.bits.shape[1]:
            grown = np.zeros((self.words, capacity), dtype=np.uint64)
            grown[:, : self.bits.shape[1]] = self.bits
            self.bits = grown
        self.bits[:, slot] = _packed((vector - self.centre)[None, :], self.words)[:, 0]

    def nearest(
        self, query: npt.NDArray[np.float32], allowed: npt.NDArray[np.bool_], count: int
    ) -> npt.NDArray[np.int64]:
        """Given a query and which slots may answer (``allowed``, one per slot in use), return up to
        ``count`` allowed slots nearest to the query by Hamming distance, in no order."""
        assert self.bits is not None
        n = len(allowed)
        signs = _packed(query[None, :], self.words)[:, 0]
        distance = np.zeros(n, dtype=np.uint16)
        scratch, popcount = np.empty(n, dtype=np.uint64), np.empty(n, dtype=np.uint8)
        for word in range(self.words):  # word by word: contiguous passes, no (n, words) temporaries
            np.bitwise_xor(self.bits[word, :n], signs[word], out=scratch)
            np.bitwise_count(scratch, out=popcount)
            distance += popcount
        candidates = np.flatnonzero(allowed)
        if len(candidates) <= count:
            return candidates
        nearest = np.argpartition(distance[candidates], count - 1)[:count]
        out: npt.NDArray[np.int64] = candidates[nearest]
        return out
