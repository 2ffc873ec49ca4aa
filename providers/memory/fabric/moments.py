"""When notes are about: the moment a note refers to and the span of time it holds for, read for a
recall's candidates in one query (the adjacency and date signals of :mod:`.recall` read them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .memory import Memory
from .rows import iso_to_epoch

__all__ = ["Moment", "moments"]


@dataclass(frozen=True)
class Moment:
    """``at``: the time the note says it refers to (``t_ref``) in epoch seconds, None without one;
    ``start`` and ``end``: the time it holds for, that moment alone when ``t_ref`` is set, else its
    validity window when it has one (open sides infinite), else the moment it was written."""

    at: float | None
    start: float
    end: float

    def meets(self, start: float, end: float) -> bool:
        """Whether the note's time falls in ``[start, end)`` (a span: overlaps it)."""
        if self.start == self.end:
            return start <= self.start < end
        return self.start < end and start < self.end


def moments(memory: Memory, rowids: Sequence[int]) -> dict[int, Moment]:
    """Given rowids, return the moments of those that are the scope's notes."""
    rows = memory.store.columns_by_rowid(memory.scope, rowids, ("t_ref", "created_at", "valid_from", "valid_to"))
    out: dict[int, Moment] = {}
    for rowid, (t_ref, created_at, valid_from, valid_to) in rows.items():
        if t_ref:
            at = iso_to_epoch(t_ref, 0.0)
            out[rowid] = Moment(at, at, at)
        elif valid_from or valid_to:
            start = iso_to_epoch(valid_from, -math.inf) if valid_from else -math.inf
            end = iso_to_epoch(valid_to, math.inf) if valid_to else math.inf
            out[rowid] = Moment(None, start, end)
        else:
            written = iso_to_epoch(created_at, 0.0)
            out[rowid] = Moment(None, written, written)
    return out
