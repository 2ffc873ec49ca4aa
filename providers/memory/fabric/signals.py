"""Signals beyond the two rankings: the time a query names (:mod:`.dates`) and adjacent notes
(:mod:`.adjacency`), applied to the fused batch before it is cut, each part kept for the explain rows.

When the query names a time, relevance becomes ``(1 − date_weight) × relevance + date_weight`` for a
note whose time meets it and ``(1 − date_weight) × relevance`` for the others (its ``dated`` part is
the difference: positive for the first, negative for the others); then adjacent notes lend theirs.
Both read the candidates' moments (:mod:`.moments`) in one query, and both are off when their weight
is 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .adjacency import adjacent_rowids, lift
from .dates import query_window
from .memory import FusionSettings, Memory
from .moments import moments

__all__ = ["Parts", "lifted"]


@dataclass(frozen=True)
class Parts:
    """What each signal added to a note's relevance (None: that signal was off)."""

    dated: float | None = None
    adjacent: float | None = None


def lifted(
    memory: Memory,
    index: Any,
    mask: Any,
    query: str,
    as_of: float,
    fused: list[tuple[int, float]],
    depth: int,
    fusion: FusionSettings,
) -> tuple[list[tuple[int, float]], dict[int, Parts]]:
    """Given the fused ``(rowid, relevance)`` batch, return it re-ranked by the signals that are on, and
    each note's parts; called with the index's lock held (the mask is read under it)."""
    window = query_window(query, datetime.fromtimestamp(as_of, UTC)) if fusion.date_weight > 0 else None
    if fused == [] or (window is None and fusion.adjacent_weight <= 0):
        return fused, {}
    known = {rowid for rowid, _ in fused}
    joined: list[int] = []
    if fusion.adjacent_weight > 0:
        extra = adjacent_rowids((rowid for rowid, _ in fused[:depth]), known, fusion.adjacent_span)
        passing = index.allowed_among(extra, mask) if extra else set()
        joined = [rowid for rowid in extra if rowid in passing]
    when = moments(memory, [*known, *joined])
    dated: dict[int, float] = {}
    if window is not None:
        start, end = window[0].timestamp(), window[1].timestamp()
        w = fusion.date_weight
        for i, (rowid, relevance) in enumerate(fused):
            moment = when.get(rowid)
            meets = moment is not None and moment.meets(start, end)
            dated[rowid] = w * ((1.0 if meets else 0.0) - relevance)
            fused[i] = (rowid, relevance + dated[rowid])
        order = {rowid: i for i, (rowid, _) in enumerate(fused)}
        fused.sort(key=lambda item: (-item[1], order[item[0]]))
    date_part = 0.0 if window is not None else None  # None: the query names no time, or the signal is off
    if fusion.adjacent_weight <= 0:
        return fused, {rowid: Parts(dated=dated.get(rowid, date_part)) for rowid, _ in fused}
    at = {rowid: moment.at for rowid, moment in when.items() if moment.at is not None}
    out = lift(fused, at, fusion.adjacent_weight, fusion.adjacent_span)
    parts = {rowid: Parts(dated=dated.get(rowid, date_part), adjacent=lent) for rowid, _, lent in out}
    return [(rowid, relevance) for rowid, relevance, _ in out], parts
