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
from .beside import beside
from .dates import query_window
from .memory import FusionSettings, Memory
from .moments import moments

__all__ = ["SIGNAL_BATCH", "Lifted", "Parts", "lifted"]


# the signals read this many of the best fused notes (and their neighbours): a note further down would
# need more than they can add to reach the few that are kept
SIGNAL_BATCH = 100


@dataclass(frozen=True)
class Parts:
    """What each signal added to a note's relevance (None: that signal was off, or the query named no time)."""

    dated: float | None = None
    adjacent: float | None = None


@dataclass(frozen=True)
class Lifted:
    """The batch re-ranked by the signals, and what each added to each note."""

    ranked: list[tuple[int, float]]
    dated: dict[int, float] | None = None
    lent: dict[int, float] | None = None

    def parts(self, rowid: int) -> Parts:
        """What the signals added to the note at ``rowid``."""
        dated = None if self.dated is None else self.dated.get(rowid, 0.0)
        return Parts(dated, None if self.lent is None else self.lent.get(rowid, 0.0))


def lifted(
    memory: Memory,
    index: Any,
    mask: Any,
    query: str,
    as_of: float,
    fused: list[tuple[int, float]],
    depth: int,
    fusion: FusionSettings,
) -> Lifted:
    """Given the fused ``(rowid, relevance)`` batch, return its best :data:`SIGNAL_BATCH` re-ranked by the
    signals that are on (all of it when none is), with each note's parts; called with the index's lock
    held (the mask is read under it)."""
    window = query_window(query, datetime.fromtimestamp(as_of, UTC)) if fusion.date_weight > 0 else None
    if not fused or (window is None and fusion.adjacent_weight <= 0):
        return Lifted(fused)
    batch = fused[: max(SIGNAL_BATCH, depth)]
    known = {rowid for rowid, _ in batch}
    extra: list[int] = []
    if fusion.adjacent_weight > 0:
        extra = adjacent_rowids((rowid for rowid, _ in batch[:depth]), known, fusion.adjacent_span)
    if extra and index.in_database:  # the neighbours' moments read beside the question whether they may join
        passing_soon = beside(lambda: index.allowed_among(extra, mask), here=memory.store.database.in_transaction())
        when = moments(memory, [*known, *extra])
        passing = passing_soon()
        when = {rowid: moment for rowid, moment in when.items() if rowid in known or rowid in passing}
    else:
        passing = index.allowed_among(extra, mask) if extra else set()
        when = moments(memory, [*known, *(rowid for rowid in extra if rowid in passing)])
    dated: dict[int, float] | None = None
    if window is not None:
        dated = {}
        start, end = window[0].timestamp(), window[1].timestamp()
        w = fusion.date_weight
        for i, (rowid, relevance) in enumerate(batch):
            moment = when.get(rowid)
            meets = moment is not None and moment.meets(start, end)
            dated[rowid] = w * ((1.0 if meets else 0.0) - relevance)
            batch[i] = (rowid, relevance + dated[rowid])
        order = {rowid: i for i, (rowid, _) in enumerate(batch)}
        batch.sort(key=lambda item: (-item[1], order[item[0]]))
    if fusion.adjacent_weight <= 0:
        return Lifted(batch, dated)
    at = {rowid: moment.at for rowid, moment in when.items() if moment.at is not None}
    out = lift(batch, at, fusion.adjacent_weight, fusion.adjacent_span)
    return Lifted([(rowid, relevance) for rowid, relevance, _ in out], dated, {rowid: lent for rowid, _, lent in out})
