"""BM25 on PostgreSQL: the lexical half of recall and consolidation, ranked the way FTS5 ranks.

``notes.lexical`` is a generated ``tsvector`` (English stemming) with a GIN index. PostgreSQL's own
``ts_rank`` knows nothing of how rare a term is across the notes, so it is not used: the score is
Okapi BM25 (k1 1.2, b 0.75, FTS5's defaults) summed over the query's lexemes, with each lexeme's
document count and the average note length from :class:`PgTermStats` (cached, refreshed as the store
grows) and each note's term frequencies read from its ``tsvector`` positions. The GIN index finds the
notes holding any lexeme; only those are scored.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

from .types import Scope

__all__ = ["PgTermStats", "pg_bm25_rowids"]

K1 = 1.2
B = 0.75

_STEMS = (
    "SELECT i, COALESCE((SELECT array_agg(lexeme ORDER BY lexeme) FROM unnest(to_tsvector('english'::regconfig, t))), "
    "'{}') FROM unnest(?::text[]) WITH ORDINALITY AS q(t, i)"
)
_DOC_FREQ = "SELECT COUNT(*) FROM notes WHERE lexical @@ quote_literal(?)::tsquery"
_CORPUS = "SELECT COUNT(*), COALESCE(AVG(length(lexical)), 0) FROM notes"

_BM25 = f"""
WITH terms(lexeme, idf) AS (SELECT * FROM unnest(?::text[], ?::float8[])),
hits AS (
    SELECT n.rowid, n.lexical, length(n.lexical) AS dl FROM notes n
    WHERE n.lexical @@ ?::tsquery AND n.tenant_id = ? AND n.resource_id = ? AND n.thread_id = ? {{filter}}
)
SELECT h.rowid FROM hits h
CROSS JOIN LATERAL unnest(h.lexical) AS u(lexeme, positions, weights)
JOIN terms t ON t.lexeme = u.lexeme
GROUP BY h.rowid, h.dl
ORDER BY SUM(t.idf * (cardinality(u.positions) * {K1 + 1})
             / (cardinality(u.positions) + {K1} * ({1 - B} + {B} * h.dl / ?))) DESC, h.rowid
LIMIT ?
"""


class PgTermStats:
    """Document counts of lexemes and the corpus size, cached until the store has grown past them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._df: dict[str, tuple[int, int]] = {}  # lexeme -> (notes holding it, change seq when counted)
        self._corpus: tuple[int, float, int] | None = None  # (notes, average length, change seq)

    @staticmethod
    def stems(conn: Any, terms: list[str]) -> list[list[str]]:
        """Given terms, return the lexemes PostgreSQL's English configuration indexes each under."""
        if not terms:
            return []
        rows = conn.execute(_STEMS, (terms,)).fetchall()
        out: list[list[str]] = [[] for _ in terms]
        for i, lexemes in rows:
            out[int(i) - 1] = list(lexemes or [])
        return out

    def doc_freq(self, conn: Any, lexemes: set[str], seq: int) -> dict[str, int]:
        """Return each lexeme's document count (recounted once the store grew past the cached count)."""
        out: dict[str, int] = {}
        for lexeme in lexemes:
            with self._lock:
                cached = self._df.get(lexeme)
            if cached is not None and seq - cached[1] <= max(64, cached[0]):
                out[lexeme] = cached[0]
                continue
            count = int(conn.execute(_DOC_FREQ, (lexeme,)).fetchone()[0])
            with self._lock:
                if len(self._df) > 200_000:
                    self._df.clear()
                self._df[lexeme] = (count, seq)
            out[lexeme] = count
        return out

    def corpus(self, conn: Any, seq: int) -> tuple[int, float]:
        """Return how many notes there are and their average length in lexemes (cached likewise)."""
        with self._lock:
            cached = self._corpus
        if cached is not None and seq - cached[2] <= max(64, cached[0] // 8):
            return cached[0], cached[1]
        count, average = conn.execute(_CORPUS).fetchone()
        found = (int(count), float(average or 0.0), seq)
        with self._lock:
            self._corpus = found
        return found[0], found[1]

    def select(self, conn: Any, terms: list[str], *, seq: int, max_postings: int, min_terms: int = 1) -> list[str]:
        """Given query terms, return the rarest ones (at least ``min_terms``) whose summed document
        counts stay under ``max_postings``: the same rule as the SQLite engine's term statistics."""
        if not terms:
            return []
        stems = self.stems(conn, terms)
        df = self.doc_freq(conn, {s for group in stems for s in group}, seq)
        cost = [max((df.get(s, 0) for s in group), default=0) for group in stems]
        order = sorted(range(len(terms)), key=lambda i: (cost[i], -len(terms[i])))
        kept: list[int] = []
        spent = 0
        for i in order:
            if len(kept) >= min_terms and spent + cost[i] > max_postings:
                break
            kept.append(i)
            spent += cost[i]
        return [terms[i] for i in sorted(kept)]


def _tsquery(lexemes: Sequence[str]) -> str:
    """An OR of the lexemes as a ``tsquery`` literal (each quoted, so nothing in it is an operator)."""
    return " | ".join("'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'" for lexeme in lexemes)


def pg_bm25_rowids(
    conn: Any,
    stats: PgTermStats,
    scope: Scope,
    terms: list[str],
    *,
    seq: int,
    limit: int | None,
    where: str = "",
    params: Sequence[Any] = (),
) -> list[int]:
    """Given query terms, return the rowids of the scope's notes holding any of them, best BM25 first
    (the best ``limit``, or all); ``where`` narrows the notes further (SQL over ``n.``'s columns)."""
    lexemes = sorted({lexeme for group in stats.stems(conn, terms) for lexeme in group})
    if not lexemes:
        return []
    df = stats.doc_freq(conn, set(lexemes), seq)
    notes, average = stats.corpus(conn, seq)
    notes = max(notes, 1)
    idf = [max(1e-6, math.log((notes - df[x] + 0.5) / (df[x] + 0.5) + 1.0)) for x in lexemes]
    sql = _BM25.format(filter=f"AND ({where})" if where else "")
    rows = conn.execute(
        sql,
        (lexemes, idf, _tsquery(lexemes), scope.tenant_id, scope.resource_id, scope.thread_id, *params,
         max(average, 1.0), limit),
    ).fetchall()  # fmt: skip
    return [int(row[0]) for row in rows]
