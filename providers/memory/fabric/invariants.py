"""The eval invariant that keeps the process/case split: a case conclusion is not a procedure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .types import MemoryNote

__all__ = ["case_conclusions_not_procedures", "lexical_tokens"]

_TOKEN = re.compile(r"[a-z0-9]+")


def lexical_tokens(text: str) -> set[str]:
    """Given text, return its lowercase alphanumeric tokens longer than one character."""
    return {token for token in _TOKEN.findall(text.lower()) if len(token) > 1}


def case_conclusions_not_procedures(
    notes: Iterable[MemoryNote | str], case_tokens: Sequence[str] | None = None
) -> float:
    """Given notes (or procedure texts) and the case's tokens, return 1.0, or 0.0 when any procedure
    contains a case token: case-bound specifics were filed as a reusable recipe.

    Without ``case_tokens`` the case is read off the non-procedure notes given: their tokens that
    carry a digit (case numbers, times, dates) are the case's specifics.
    """
    procedures: list[str] = []
    others: list[str] = []
    for note in notes:
        if isinstance(note, str):
            procedures.append(note)
        elif note.kind == "procedure":
            procedures.append(note.content)
        else:
            others.append(note.content)
    if case_tokens is None:
        denied = {t for text in others for t in lexical_tokens(text) if any(c.isdigit() for c in t)}
    else:
        denied = {t for token in case_tokens for t in lexical_tokens(token)}
    for text in procedures:
        if lexical_tokens(text) & denied:
            return 0.0
    return 1.0
