"""How literals become an FTS5 query of a trigram index: the candidate rows that may contain them all.

A quoted literal is a phrase of all its overlapping trigrams, and FTS5 reads the positions of every
one of them: at 10k notes a 25-character phrase costs about 1.6 ms, nearly all of it in trigrams
that the others already cover. Instead each literal is cut into non-overlapping pieces of three
characters (plus the last three, so the end is covered) that must all occur within a window of the
literal's length (``NEAR``): about half the time, with almost the same rows (147 against 140 on the
load bench's queries). The rows are candidates only: the matcher checks every one against the text.

This is the SQLite store's index; a PostgreSQL store asks its pg_trgm indexes with ``ILIKE`` instead
(:mod:`.pg_trigram`).
"""

from __future__ import annotations

__all__ = ["trigram_query"]

PIECE = 3


def trigram_query(literals: list[str]) -> str:
    """Given literals of at least three characters each (no NUL), return the FTS5 MATCH expression
    of the rows whose trigrams can contain them all."""
    return " AND ".join(_near(literal) for literal in literals)


def _near(literal: str) -> str:
    starts = list(range(0, len(literal) - PIECE + 1, PIECE))
    if starts[-1] != len(literal) - PIECE:
        starts.append(len(literal) - PIECE)
    pieces = list(dict.fromkeys(_quoted(literal[i : i + PIECE]) for i in starts))
    if len(pieces) == 1:
        return pieces[0]
    return f"NEAR({' '.join(pieces)}, {len(literal)})"


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'
