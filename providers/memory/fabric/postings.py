"""The sparse side of :class:`~.vectors.VectorIndex`: per-dimension postings of its rows, so a query of a
sparse embedder (the hash embedder's bags of tokens) touches only its own dimensions.

Rows added since the postings were built form a contiguous tail scored with one matvec, folded into
the postings every ``_TAIL_MERGE_AT`` rows; rows changed below it are scored exactly on top, and the
postings are built again when too many have changed. A dense embedder's rows get no postings: one
matvec beats them.

Mixed into :class:`~.vectors.VectorIndex`, whose matrix and row count it reads.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .fold_search import reachable_rows

__all__ = ["Postings", "dots"]

# new rows are scored densely until this many, then folded into the postings
_TAIL_MERGE_AT = 256


def dots(rows: npt.NDArray[np.float32], query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Given a few rows, return their dot products with the query, on this thread: a BLAS matvec
    may hand small blocks to its thread pool, which costs milliseconds on a busy machine."""
    out: npt.NDArray[np.float32] = np.einsum("ij,j->i", rows, query)
    return out


class Postings:
    """Per-dimension postings over a row matrix (see the module)."""

    matrix: npt.NDArray[np.float32]
    size: int
    dims: int
    _sparse: tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float32]] | None
    _dirty: set[int]
    _moved: set[int]
    _built: int
    _max_norm2: float
    _dense: bool

    def _postings_stale(self) -> bool:
        """Rebuild the postings when there are none or too many rows' postings are stale; fold a
        long tail of new rows into them (cheaper than a rebuild, and it keeps the tail short)."""
        if self._dense:
            return False
        if self._sparse is None or len(self._moved) > max(1024, self.size // 32):
            return True
        if self.size - self._built >= _TAIL_MERGE_AT:
            self._merge_tail()
        return False

    def _merge_tail(self) -> None:
        assert self._sparse is not None
        indptr, rows, vals = self._sparse
        n = self.size
        tail_rows, tail_cols = np.nonzero(self.matrix[self._built : n])
        order = np.argsort(tail_cols, kind="stable")
        tail_rows, tail_cols = tail_rows[order] + self._built, tail_cols[order]
        at = indptr[tail_cols + 1]  # each new entry goes at the end of its dimension's run
        added = np.bincount(tail_cols, minlength=self.dims)
        self._sparse = (
            indptr + np.concatenate([[0], np.cumsum(added)]),
            np.insert(rows, at, tail_rows.astype(np.int32)),
            np.insert(vals, at, self.matrix[tail_rows, tail_cols]),
        )
        self._dirty = set(self._moved)
        self._built = n

    def _scores(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Cosine of the query to every row. Sparse rows are scored through per-dimension postings,
        touching only the query's dimensions; rows changed since the postings were built are scored
        densely on top (the tail of new rows as one contiguous matvec)."""
        n = self.size
        if self._postings_stale():
            self._build_postings()
        if self._sparse is None:
            return self.matrix[:n] @ query
        indptr, rows, vals = self._sparse
        dims = np.flatnonzero(query)
        if len(dims) > self.dims // 4:
            return self.matrix[:n] @ query
        spans = [(int(indptr[d]), int(indptr[d + 1])) for d in dims]
        take = np.concatenate([np.arange(a, b) for a, b in spans]) if spans else np.zeros(0, dtype=np.int64)
        weights = vals[take] * np.repeat(query[dims], [b - a for a, b in spans])
        sims = np.bincount(rows[take], weights=weights, minlength=n)[:n].astype(np.float32)
        self._score_dirty(query, sims)
        return sims

    def _score_dirty(self, query: npt.NDArray[np.float32], sims: npt.NDArray[np.float32]) -> None:
        """Overwrite ``sims`` of the rows the postings do not describe with their exact cosine."""
        n = self.size
        if self._built < n:
            sims[self._built : n] = dots(self.matrix[self._built : n], query)
        if self._moved:
            fresh = np.fromiter(self._moved, dtype=np.int64, count=len(self._moved))
            sims[fresh] = dots(self.matrix[fresh], query)

    def _build_postings(self) -> None:
        n = self.size
        self._dirty.clear()
        self._moved.clear()
        self._built = n
        if n == 0:
            self._sparse = None
            return
        rows, cols = np.nonzero(self.matrix[:n])
        if len(rows) > n * self.dims // 8:  # dense embedder: one matvec beats postings
            self._sparse = None
            self._dense = True
            return
        order = np.argsort(cols, kind="stable")
        indptr = np.zeros(self.dims + 1, dtype=np.int64)
        indptr[1:] = np.cumsum(np.bincount(cols, minlength=self.dims))
        self._sparse = (indptr, rows[order].astype(np.int32), self.matrix[rows[order], cols[order]])

    def _pruned(self, query: npt.NDArray[np.float32], floor: float) -> npt.NDArray[np.int64] | None:
        """Return the built slots that may reach ``floor`` (see :func:`reachable_rows`), or None for a
        query too dense for postings or a floor too low to prune (every row is then scored)."""
        assert self._sparse is not None
        if floor <= 0 or np.count_nonzero(query) > self.dims // 4:
            return None
        return reachable_rows(self._sparse, self._built, query, floor, self._max_norm2)
