"""Which indexed rows can reach a cosine threshold with a query, read from per-dimension postings.

The write path asks this on every remember with consolidation on (is there a near-duplicate?), so it
reads as few postings as the bound allows. The query's dimensions are taken rarest first:

1. **Prefix.** A row that shares none of the first k dimensions scores at most ``|q_rest| * max|r|``
   (Cauchy-Schwarz over the dimensions left). With the smallest k that puts this under the floor,
   only the rows of those k postings can reach it; the rarest postings are the shortest.
2. **Bound.** For those rows, the score over the dimensions read so far plus
   ``|q_rest| * sqrt(max|r|^2 - |r_read|^2)`` bounds the whole score; a row whose bound is under the
   floor is dropped. Reading a few dimensions past the prefix in the same pass (weighted bincounts)
   leaves few rows; each further dimension is then looked up for those rows only (the postings list
   their rows in ascending order), until few enough are left for the caller to score exactly.

Exact: no row that reaches the floor is dropped (every bound overestimates).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = ["Postings", "reachable_rows"]

# per-dimension postings: ``indptr`` (dims + 1), each entry's row (ascending within a dimension), its value
Postings = tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float32]]

# dimensions read past the prefix in the first pass: each costs one more posting and leaves far fewer
# rows to look up one by one (at 100k hash-embedded notes: a median of ~25k rows after the prefix alone,
# ~30 after four more; four was the fastest of two to six there)
_EXTRA = 4
# this few rows are left to the caller's exact dot products
_FEW = 32


def reachable_rows(postings: Postings, built: int, query: npt.NDArray[np.float32], floor: float,
                   max_norm2: float) -> npt.NDArray[np.int64]:  # fmt: skip
    """Given postings over rows ``0..built-1``, a query, a floor > 0 and the largest squared row norm,
    return (ascending) a superset of the rows whose dot product with the query is at least ``floor``."""
    indptr, rows, vals = postings
    dims = np.flatnonzero(query)
    if len(dims) == 0 or built == 0:
        return np.zeros(0, dtype=np.int64)
    dims = dims[np.argsort(indptr[dims + 1] - indptr[dims], kind="stable")]
    weights = query[dims].astype(np.float64)
    # rest[i] = |q| over dims[i:]; rest[len(dims)] = 0
    rest = np.sqrt(np.append(np.cumsum((weights * weights)[::-1])[::-1], 0.0))
    prefix = int(np.argmax(rest * math.sqrt(max_norm2) < floor))
    if prefix == 0:  # the whole query cannot reach the floor
        return np.zeros(0, dtype=np.int64)
    read = min(prefix + _EXTRA, len(dims))
    spans = [(int(indptr[d]), int(indptr[d + 1])) for d in dims[:read]]
    hits = np.concatenate([rows[a:b] for a, b in spans])
    values = np.concatenate([vals[a:b] for a, b in spans]).astype(np.float64)
    per_hit = np.repeat(weights[:read], [b - a for a, b in spans])
    score = np.bincount(hits, weights=values * per_hit, minlength=built).astype(np.float64, copy=False)
    # a row needs this much from the dimensions read, whatever it holds of the rest
    candidates = np.flatnonzero(score >= floor - rest[read] * math.sqrt(max_norm2))
    score = score[candidates]
    seen = np.bincount(hits, weights=values * values, minlength=built)[candidates].astype(np.float64, copy=False)
    return _narrow(postings, dims, weights, rest, read, candidates, score, seen, floor, max_norm2)


def _narrow(postings: Postings, dims: npt.NDArray[np.int64], weights: npt.NDArray[np.float64],
            rest: npt.NDArray[np.float64], start: int, candidates: npt.NDArray[np.int64],
            score: npt.NDArray[np.float64], seen: npt.NDArray[np.float64], floor: float,
            max_norm2: float) -> npt.NDArray[np.int64]:  # fmt: skip
    """Add dimensions ``start..`` to the candidates' scores (``score`` and ``seen`` are theirs, in the
    same order), dropping those that can no longer reach the floor, until few are left."""
    indptr, rows, vals = postings
    for i in range(start, len(dims) + 1):
        keep = score + rest[i] * np.sqrt(np.maximum(max_norm2 - seen, 0.0)) >= floor
        candidates, score, seen = candidates[keep], score[keep], seen[keep]
        if len(candidates) <= _FEW or i == len(dims):
            break
        posting = rows[indptr[dims[i]] : indptr[dims[i] + 1]]
        if len(posting):
            place = np.minimum(np.searchsorted(posting, candidates), len(posting) - 1)
            hit = posting[place] == candidates
            values = vals[indptr[dims[i]] + place[hit]].astype(np.float64)
            score[hit] += weights[i] * values
            seen[hit] += values * values
    return candidates.astype(np.int64)
