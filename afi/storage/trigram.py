"""How literals become an FTS5 query of a trigram index: the candidate rows that may contain them all.

The index keeps which rows hold each trigram, not where (``detail=none``, a quarter of the bytes of a
positional index), so a literal asks for all its distinct overlapping trigrams at once. A row with
every trigram of a literal may still not contain it (``abcd`` and ``bcab`` share ``abc`` and
``bca``), so the rows are candidates only: the matcher checks every one against the text. On the
load bench's queries this finds the rows a positional phrase query found (62,842 candidates against
64,044) in the same time.

This is the SQLite store's index; a PostgreSQL store asks its pg_trgm indexes with ``ILIKE`` instead
(:mod:`.pg_trigram`).
"""

from __future__ import annotations

__all__ = ["trigram_query"]

PIECE = 3


def trigram_query(literals: list[str]) -> str:
    """Given literals of at least three characters each (no NUL), return the FTS5 MATCH expression
    of the rows that hold every trigram of them all."""
    trigrams = dict.fromkeys(literal[i : i + PIECE] for literal in literals for i in range(len(literal) - PIECE + 1))
    return " AND ".join(_quoted(trigram) for trigram in trigrams)


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'
