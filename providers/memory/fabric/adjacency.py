"""Adjacent notes: a note written just before or after another, about the same moment, lends it relevance.

A conversation stored turn by turn, or the notes taken from one session, is a run of notes written one
after another that say they refer to the same time: ``t_ref`` (the session's date, or each message's
time) within :data:`SAME_MOMENT_SECONDS` of each other. Notes without ``t_ref`` (a fact remembered on
its own, a file) take no part: being written one after the other says nothing of their subjects.

The turn that holds an answer is often not the one that names the subject ("What did she paint?" is
answered by the reply to the turn about painting), so recall lets a note borrow the relevance of the
notes adjacent to it in its run:

    relevance = own + weight × lent × (1 − own)

where ``own`` is the note's fused relevance and ``lent`` the noisy-or of its neighbours' own relevance,
each halved for every step away (one step is one row written; up to ``span`` steps each side). The
result stays in [0,1], a note at 1 keeps 1, and a note that no ranking found can enter the batch when
its neighbour ranks near the top. ``weight`` 0 turns the signal off.

Adjacency is the store's write order (``rowid``), so notes of other scopes written in between stretch
a run; it needs no column, no index and no schema of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["SAME_MOMENT_SECONDS", "adjacent_rowids", "lift"]

# Notes whose t_ref lie this close together are one run (the messages of one exchange, an hour at most apart).
SAME_MOMENT_SECONDS = 3600.0


def adjacent_rowids(top: Iterable[int], known: set[int], span: int) -> list[int]:
    """Given the best rowids, return the rowids within ``span`` rows of them that ``known`` lacks."""
    out: dict[int, None] = {}
    for rowid in top:
        for step in range(1, span + 1):
            for other in (rowid - step, rowid + step):
                if other > 0 and other not in known:
                    out[other] = None
    return list(out)


def lift(
    fused: Sequence[tuple[int, float]], moment: dict[int, float], weight: float, span: int
) -> list[tuple[int, float, float]]:
    """Given the fused ``(rowid, relevance)`` list and the ``t_ref`` of its notes and of their neighbours
    (a neighbour absent from ``fused`` has relevance 0), return ``(rowid, relevance, lent)`` best first.

    A fused note without a moment (no ``t_ref``) keeps its relevance and neither lends nor receives; a
    neighbour without one (not the scope's, deleted, no ``t_ref``) is left out.
    """
    own = dict(fused)
    out: list[tuple[int, float, float]] = []
    for rowid, when in moment.items():
        mine = own.get(rowid, 0.0)
        unlent = 1.0
        for step in range(1, span + 1):
            for other in (rowid - step, rowid + step):
                theirs = own.get(other)
                other_when = moment.get(other)
                if not theirs or other_when is None or abs(other_when - when) > SAME_MOMENT_SECONDS:
                    continue
                unlent *= 1.0 - theirs * 0.5 ** (step - 1)
        lent = weight * (1.0 - unlent) * (1.0 - mine)
        if mine > 0 or lent > 0:
            out.append((rowid, mine + lent, lent))
    out.extend((rowid, relevance, 0.0) for rowid, relevance in fused if rowid not in moment)
    order = {rowid: i for i, (rowid, _) in enumerate(fused)}
    out.sort(key=lambda item: (-item[1], order.get(item[0], len(order))))
    return out
