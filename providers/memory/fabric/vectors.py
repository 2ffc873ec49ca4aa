"""The vector side of recall: a scope's embeddings as one cached numpy matrix, with per-row masks.

Loaded once per process and scope, then kept fresh from ``note_changes``: a recall reads the
scope's latest change seq and applies only the rows changed since (its own writes and any other
process's), so the matrix is never rebuilt per query. Kind, validity, consent and lineage are
boolean masks over the rows, applied before ranking.

A large dense scope (a sentence embedder's, past ``PREFILTER_ROWS`` rows) is searched by its rows'
sign bits first (:mod:`.sign_bits`). Sparse rows (the hash embedder's bags of tokens) are also kept
as per-dimension postings, so a query touches only its own dimensions; rows added since the postings
were built form a contiguous tail that is scored with one matvec. ``above`` answers the write path's
question (which rows are at least this similar?) exactly while reading only the postings of the
query's rarest dimensions.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .postings import Postings, dots
from .rows import consent_state, iso_to_epoch, json_list
from .sign_bits import CANDIDATES, OVERSAMPLE, PREFILTER_ROWS, SignBits
from .store import Store
from .types import NOTE_KINDS, Scope
from .vector_bytes import unpack_vector

__all__ = ["FOLD_EXACT_ROWS", "VectorIndex"]

_KIND_CODE = {kind: code for code, kind in enumerate(NOTE_KINDS)}
_FULL_RELOAD_AT = 5_000
# a bound computed in float64 from float32 rows may be off by a few ulps; rows this close to the
# threshold are kept and scored exactly
_BOUND_SLACK = 1e-4
# consolidation reads the vectors exactly up to this many rows in a scope; past it the postings scan
# (about 10 ms at a million hash-embedded rows, linear) costs more than the word index's answer (~5 ms)
FOLD_EXACT_ROWS = 250_000

# ``Store.index_rows`` columns
_ROWID, _ID, _KIND, _VALID_FROM, _VALID_TO, _CONSENT, _SOURCES, _STATUS, _BLOB = range(9)


class VectorIndex(Postings):
    """One scope's note embeddings plus the row metadata recall filters on."""

    in_database = False  # the mask is this process's: recall filters the BM25 ranking by it, under the lock

    def __init__(self, store: Store, scope: Scope, dims: int) -> None:
        self.store = store
        self.scope = scope
        self.dims = dims
        self.lock = threading.Lock()
        self.fold_exact_rows = FOLD_EXACT_ROWS
        self.prefilter_rows = PREFILTER_ROWS  # a dense scope this large is cut by sign bits first (sign_bits)
        self.seq = -1
        self._fill = 0  # the last vector fill read (backlog.VectorBacklog.fills_since)
        self._lineage: dict[str, str] | None = None
        self._tainted: set[int] = set()
        self._stale = False
        self._reset(0)
        store.on_transaction_end(self._transaction_ended)

    def _reset(self, capacity: int) -> None:
        capacity = max(capacity, 64)
        self.matrix = np.zeros((capacity, self.dims), dtype=np.float32)
        self.kind = np.full(capacity, -1, dtype=np.int8)
        self.valid_from = np.zeros(capacity, dtype=np.float64)
        self.valid_to = np.zeros(capacity, dtype=np.float64)
        self.consent = np.zeros(capacity, dtype=np.int8)
        self.blocked = np.zeros(capacity, dtype=bool)
        self.live = np.zeros(capacity, dtype=bool)
        self.vectored = np.zeros(capacity, dtype=bool)  # False: a note whose vector is not made yet
        self.rowids = np.zeros(capacity, dtype=np.int64)
        self.slot_of: dict[str, int] = {}
        self.slot_of_rowid: dict[int, int] = {}
        self._ascending = True  # rowids[:size] ascend: a rowid's slot is a binary search away
        self.sources: dict[int, list[str]] = {}
        self.size = 0
        self._sparse: tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.float32]] | None = None
        self._dirty: set[int] = set()  # slots changed since the postings were built (the tail included)
        self._moved: set[int] = set()  # the dirty slots below ``_built``: their postings are stale
        self._built = 0  # slots below this are in the postings
        self._max_norm2 = 0.0  # the largest squared row norm seen (never lowered: a bound stays a bound)
        self._dense = False
        self._signs = SignBits(self.dims)  # a large dense scope's first cut (sign_bits), built at its first search

    def _grow(self) -> None:
        capacity = self.matrix.shape[0] * 2
        for name in ("matrix", "kind", "valid_from", "valid_to", "consent", "blocked", "live", "vectored", "rowids"):
            old = getattr(self, name)
            new = np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)

    def _put(self, row: Sequence[Any], revoked: dict[str, str]) -> None:
        note_id = row[_ID]
        slot = self.slot_of.get(note_id)
        if slot is None:
            if self.size == self.matrix.shape[0]:
                self._grow()
            slot = self.size
            self.size += 1
            self.slot_of[note_id] = slot
            self._ascending &= slot == 0 or row[_ROWID] > self.rowids[slot - 1]
        else:
            self.slot_of_rowid.pop(int(self.rowids[slot]), None)
            self._ascending &= row[_ROWID] == self.rowids[slot]
        self.rowids[slot] = row[_ROWID]
        self._dirty.add(slot)
        self.slot_of_rowid[int(row[_ROWID])] = slot
        blob = row[_BLOB]
        vector = unpack_vector(blob) if blob else np.zeros(self.dims, dtype=np.float32)
        if slot < self._built and not np.array_equal(self.matrix[slot], vector):
            self._moved.add(slot)  # its postings now describe an older embedding
        self.matrix[slot] = vector
        self._signs.put(slot, vector, self.matrix.shape[0])
        self._max_norm2 = max(self._max_norm2, float(self.matrix[slot] @ self.matrix[slot]))
        self.kind[slot] = _KIND_CODE.get(row[_KIND], -1)
        self.valid_from[slot] = iso_to_epoch(row[_VALID_FROM], -math.inf)
        self.valid_to[slot] = iso_to_epoch(row[_VALID_TO], math.inf)
        self.consent[slot] = consent_state(row[_CONSENT])
        sources = json_list(row[_SOURCES])
        if sources:
            self.sources[slot] = sources
        else:
            self.sources.pop(slot, None)
        self.blocked[slot] = any(source in revoked for source in sources)
        self.live[slot] = row[_STATUS] == "active"
        self.vectored[slot] = bool(blob)

    def _load(self, rows: list[tuple[Any, ...]], revoked: dict[str, str]) -> None:
        """Replace the whole index with these rows, column by column (a per-row put costs 10x)."""
        n = len(rows)
        self._reset(int(n * 1.25))
        if n == 0:
            return
        rows = sorted(rows, key=lambda row: row[_ROWID])  # slots in rowid order: see ``_slots``
        cols = list(zip(*rows, strict=True))
        for slot, blob in enumerate(cols[_BLOB]):
            if blob:
                vector = unpack_vector(blob)
                if vector.size == self.dims:
                    self.matrix[slot] = vector
        self._max_norm2 = float(np.einsum("ij,ij->i", self.matrix[:n], self.matrix[:n]).max())
        self.rowids[:n] = cols[_ROWID]
        self.kind[:n] = [_KIND_CODE.get(k, -1) for k in cols[_KIND]]
        self.valid_from[:n] = [-math.inf if v is None else iso_to_epoch(v, 0.0) for v in cols[_VALID_FROM]]
        self.valid_to[:n] = [math.inf if v is None else iso_to_epoch(v, 0.0) for v in cols[_VALID_TO]]
        self.consent[:n] = [0 if c is None else consent_state(c) for c in cols[_CONSENT]]
        self.live[:n] = [status == "active" for status in cols[_STATUS]]
        self.vectored[:n] = [bool(blob) for blob in cols[_BLOB]]
        for slot, raw in enumerate(cols[_SOURCES]):
            sources = json_list(raw)
            if sources:
                self.sources[slot] = sources
                self.blocked[slot] = any(source in revoked for source in sources)
        self.slot_of = dict(zip(cols[_ID], range(n), strict=True))
        self.slot_of_rowid = dict(zip(cols[_ROWID], range(n), strict=True))
        self.size = n
        self._ascending = bool(np.all(np.diff(self.rowids[:n]) > 0))

    def _drop(self, note_id: str) -> None:
        slot = self.slot_of.get(note_id)
        if slot is not None:
            self.live[slot] = False

    def _transaction_ended(self, tx: int, committed: bool) -> None:
        if tx in self._tainted:
            self._tainted.discard(tx)
            if not committed:  # the index holds rows that never were: rebuild it
                self._stale = True

    def refresh(self) -> None:
        """Bring the matrix up to the scope's latest change (call with ``lock`` held).

        Raises MemoryValidationError when the store's vectors were moved to another embedder meanwhile.
        """
        self.store.check_vectors()
        tx = self.store.uncommitted_tx()
        if tx is not None:  # reading another write's uncommitted rows: forget them if it rolls back
            self._tainted.add(tx)
        if self._stale:
            self._stale = False
            self.seq = -1
        latest = self.store.change_seq(self.scope)
        # vectors filled in since (notes written before their vectors: .trailing); None: read it all again
        newest_fill, filled = self.store.fills_since(self.scope, self._fill) if self.seq >= 0 else (0, [])
        if filled is None:
            self.seq = -1
        revoked = self.store.revoked_sources(self.scope)
        if revoked != self._lineage:
            self._lineage = revoked
            for slot, sources in self.sources.items():
                self.blocked[slot] = any(source in revoked for source in sources)
        if latest == self.seq and not filled:
            self._fill = newest_fill
            return
        changes = self.store.changes_since(self.scope, self.seq) if self.seq >= 0 else []
        if self.seq < 0 or len(changes) > _FULL_RELOAD_AT:
            self._fill = self.store.newest_fill()  # read before the rows: a fill meanwhile is read again
            self._load(self.store.index_rows(self.scope, "TRUE"), revoked)
            self._build_postings()
        else:
            self._fill = newest_fill
            ids = list(dict.fromkeys([*(note_id for _, note_id, _ in changes), *(filled or [])]))
            found: set[str] = set()
            rows = []
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                rows += self.store.index_rows(self.scope, f"id IN ({', '.join('?' * len(chunk))})", chunk)
            for row in sorted(rows, key=lambda row: row[_ROWID]):  # new rows keep the slots' rowids ascending
                found.add(row[_ID])
                self._put(row, revoked)
            for note_id in ids:
                if note_id not in found:
                    self._drop(note_id)
        self.seq = latest

    def mask(self, kinds: Sequence[str], as_of: float, require_consent: bool) -> npt.NDArray[np.bool_]:
        """Return which rows may be recalled: live, of those kinds, valid at ``as_of``, visible, unblocked."""
        return self._allowed(slice(0, self.size), kinds, as_of, require_consent)

    def _allowed(self, at: Any, kinds: Sequence[str], as_of: float, require_consent: bool) -> npt.NDArray[np.bool_]:
        wanted = np.zeros(len(NOTE_KINDS) + 1, dtype=bool)  # the last slot answers code -1 (unknown kind)
        wanted[[_KIND_CODE[kind] for kind in kinds]] = True
        mask = self.live[at] & wanted[self.kind[at]] & ~self.blocked[at]
        mask &= (self.valid_from[at] <= as_of) & (self.valid_to[at] > as_of)
        mask &= (self.consent[at] == 1) if require_consent else (self.consent[at] != 2)
        out: npt.NDArray[np.bool_] = mask
        return out

    def top(self, query: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], limit: int) -> list[tuple[int, float]]:
        """Return up to ``limit`` ``(rowid, cosine)`` of the masked rows, most similar first."""
        n = self.size
        if n == 0 or limit <= 0:
            return []
        if self._dense and n >= self.prefilter_rows:
            return self._top_by_signs(query, mask, limit)
        sims = np.where(mask & self.vectored[:n], self._scores(query), -np.inf)
        k = min(limit, n)
        idx = np.argpartition(-sims, k - 1)[:k] if k < n else np.arange(n)
        idx = idx[np.argsort(-sims[idx], kind="stable")]
        return [(int(self.rowids[i]), float(sims[i])) for i in idx if sims[i] > -np.inf]

    def _top_by_signs(self, query: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_],
                      limit: int) -> list[tuple[int, float]]:  # fmt: skip
        """:meth:`top` of a large dense scope: the rows nearest by their signs, scored exactly (``sign_bits``)."""
        n = self.size
        if self._signs.bits is None:
            self._signs.build(self.matrix, self.vectored, n)
        slots = self._signs.nearest(query, mask & self.vectored[:n], max(limit * OVERSAMPLE, CANDIDATES))
        sims = dots(self.matrix[slots], query)
        best = np.argsort(-sims, kind="stable")[:limit]
        return [(int(self.rowids[slots[i]]), float(sims[i])) for i in best]

    def folds_by_vectors(self) -> bool:
        """Whether consolidation asks :meth:`above` for near-duplicates: while the scope holds at most
        ``fold_exact_rows`` rows; past that the word index names the candidates (linear no more). Asked
        before :meth:`refresh`: a process's first fold counts no rows yet, goes by the vectors, loads them."""
        return self.size <= self.fold_exact_rows

    def above(self, query: npt.NDArray[np.float32], threshold: float, kinds: Sequence[str], as_of: float,
              require_consent: bool, *, limit: int = 32) -> list[tuple[int, float]]:  # fmt: skip
        """Return ``(rowid, cosine)`` of the (up to ``limit``) recallable rows, as ``mask`` decides,
        whose cosine is at least ``threshold``, most similar first; the cosine is the plain dot product.

        Exact, yet it scores only the rows whose postings show they may reach the threshold (see
        ``_pruned``) and the rows added or changed since the postings were built; every row only for a
        dense query or a threshold of zero or less.
        """
        n = self.size
        if n == 0:
            return []
        if self._postings_stale():
            self._build_postings()
        floor = threshold - _BOUND_SLACK
        pruned = self._pruned(query, floor) if self._sparse is not None else None
        if pruned is None:  # dense rows, or a threshold too low to prune: score every row
            sims = self._scores(query)
            picked = np.flatnonzero(self.mask(kinds, as_of, require_consent) & (sims >= floor))
        else:
            parts = [pruned]
            if self._built < n:
                tail = dots(self.matrix[self._built : n], query)
                parts.append(self._built + np.flatnonzero(tail >= floor))
            if self._moved:
                moved = np.fromiter(self._moved, dtype=np.int64, count=len(self._moved))
                parts.append(moved[dots(self.matrix[moved], query) >= floor])
            picked = np.unique(np.concatenate(parts))
            picked = picked[self._allowed(picked, kinds, as_of, require_consent)]
            picked = picked[dots(self.matrix[picked], query) >= floor]
        if len(picked) > limit:
            picked = picked[np.argsort(-dots(self.matrix[picked], query), kind="stable")[:limit]]
        # the reported cosine is a 1-D dot, exactly as a row's stored embedding scores on its own
        found = [(int(self.rowids[slot]), float(self.matrix[slot] @ query)) for slot in picked]
        found = [(rowid, cosine) for rowid, cosine in found if cosine >= threshold]
        found.sort(key=lambda item: -item[1])
        return found

    def above_among(self, query: npt.NDArray[np.float32], rowids: Sequence[int], threshold: float,
                    kinds: Sequence[str], as_of: float, require_consent: bool, *, limit: int = 32
                    ) -> list[tuple[int, float]]:  # fmt: skip
        """:meth:`above` over those rowids only (rows of other scopes or unknown are left out)."""
        slots = self._slots(rowids)
        slots = slots[self._allowed(slots, kinds, as_of, require_consent)]
        slots = slots[dots(self.matrix[slots], query) >= threshold - _BOUND_SLACK]
        # the reported cosine is a 1-D dot, exactly as :meth:`above` reports it
        found = [(int(self.rowids[slot]), float(self.matrix[slot] @ query)) for slot in slots]
        return sorted(((r, c) for r, c in found if c >= threshold), key=lambda item: -item[1])[:limit]

    def near_among_many(self, queries: npt.NDArray[np.float32], candidates: Mapping[int, Sequence[int]],
                        kinds: Mapping[int, str], threshold: float, as_of: float, require_consent: bool
                        ) -> set[int]:  # fmt: skip
        """Of the keys of ``candidates`` (rows of ``queries``), those for which :meth:`above_among` of
        their own rowids and kind finds a row (a many-note remember's fold): the rows looked up and
        masked all at once, each key's scored by its own query."""
        asking = [at for at, rowids in candidates.items() if len(rowids)]
        if not asking or self.size == 0:
            return set()
        ends = np.cumsum([len(candidates[at]) for at in asking])
        slots = self._slot_of_each(np.concatenate([np.asarray(candidates[at], dtype=np.int64) for at in asking]))
        ok = slots >= 0
        owner = np.repeat(np.arange(len(asking)), np.diff(ends, prepend=0))
        for kind in set(kinds[at] for at in asking):
            of_kind = np.array([kinds[at] == kind for at in asking])[owner] & ok
            ok[of_kind] = self._allowed(slots[of_kind], [kind], as_of, require_consent)
        near: set[int] = set()
        start = 0
        for at, end in zip(asking, ends.tolist(), strict=True):
            chosen = slots[start:end][ok[start:end]]
            start = end
            if not chosen.size:
                continue
            close = chosen[dots(self.matrix[chosen], queries[at]) >= threshold - _BOUND_SLACK]
            # the cosine decided on as :meth:`above_among` reports it: a 1-D dot
            if any(float(self.matrix[slot] @ queries[at]) >= threshold for slot in close.tolist()):
                near.add(at)
        return near

    def _slots(self, rowids: Sequence[int]) -> npt.NDArray[np.int64]:
        """The slots of those rowids this index holds."""
        wanted = np.asarray(rowids, dtype=np.int64)
        if self._ascending:
            wanted = np.sort(wanted)  # in order, the searches share cache lines
        slots = self._slot_of_each(wanted)
        return slots[slots >= 0]

    def _slot_of_each(self, rowids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Each rowid's slot, -1 for one this index does not hold (rows in rowid order are searched, else
        a dict lookup each, ~1 µs at a million)."""
        if not self._ascending or self.size == 0:
            return np.fromiter(map(self.slot_of_rowid.get, rowids.tolist(), itertools.repeat(-1)), np.int64,
                               len(rowids))  # fmt: skip
        held = self.rowids[: self.size]
        at = np.minimum(np.searchsorted(held, rowids), self.size - 1)
        found: npt.NDArray[np.int64] = np.where(held[at] == rowids, at, -1).astype(np.int64)
        return found

    def cosine(self, query: npt.NDArray[np.float32], rowids: Sequence[int]) -> dict[int, float]:
        """Return the cosine of the query to each known rowid."""
        out: dict[int, float] = {}
        for rowid in rowids:
            slot = self.slot_of_rowid.get(rowid)
            if slot is not None:
                out[rowid] = float(self.matrix[slot] @ query)
        return out

    def allowed_among(self, rowids: Sequence[int], mask: npt.NDArray[np.bool_]) -> set[int]:
        """Those of the rowids that pass the mask."""
        return {rowid for rowid in rowids if self.allowed(rowid, mask)}

    def allowed(self, rowid: int, mask: npt.NDArray[np.bool_]) -> bool:
        """Return whether a rowid passes the mask (unknown rows do not)."""
        slot = self.slot_of_rowid.get(rowid)
        return slot is not None and bool(mask[slot])
