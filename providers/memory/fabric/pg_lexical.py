"""BM25 on PostgreSQL: the lexical half of recall and consolidation, ranked the way FTS5 ranks.

A note's lexemes are :data:`~afi.storage.pg_derived_notes.LEXEMES_SQL` (English stemming, no positions),
which a GIN index keeps; the note keeps only their count (``notes.lexemes``). PostgreSQL's own
``ts_rank`` knows nothing of how rare a term is across the notes, so it is not used: the score is
Okapi BM25 (k1 1.2, b 0.75, FTS5's defaults) summed over the query's lexemes, with each lexeme's
document count and the average note length from :class:`PgTermStats` (cached, refreshed as the store
grows). A note's term frequency is taken as one for each lexeme it holds rather than read from
positions (the index keeps none): for notes of a few sentences BM25's saturating tf is 1 almost always
(LoCoMo dev recall@10 is the same: 64.7 with exact tf, 64.6 without). So a note's score is the sum of the weights of
the query lexemes it holds, scaled by its length: the query asks the index for each lexeme's notes on
its own (``UNION ALL``) and sums per note, never computing a note's lexemes again.

Document counts of common lexemes come from the planner's own statistics of the index's expression
(ANALYZE keeps the most common lexemes of a ``tsvector`` with their frequencies in ``pg_stats``):
counting a common lexeme's notes cost 5 ms each at 100k notes. The rest, rarer than any lexeme in
those statistics, are counted, up to a cap (the caller's posting budget: a lexeme past it is left
out of the query by the term selection anyway).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

from afi.storage.pg_derived_notes import LEXEMES_SQL

from .lexical import StemCache, rarest_terms, stale_after
from .types import Scope

__all__ = ["PgTermStats", "pg_bm25_rowids"]

K1 = 1.2
B = 0.75

_STEMS = (
    "SELECT i, COALESCE((SELECT array_agg(lexeme ORDER BY lexeme) FROM unnest(to_tsvector('english'::regconfig, t))), "
    "'{}') FROM unnest(?::text[]) WITH ORDINALITY AS q(t, i)"
)
_DOC_FREQ = (
    f"SELECT COUNT(*) FROM (SELECT 1 FROM notes WHERE {LEXEMES_SQL} @@ quote_literal(?)::tsquery LIMIT ?) AS hit"
)
_CORPUS = "SELECT COUNT(*), COALESCE(AVG(lexemes), 0) FROM notes"
_COMMON = (
    "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats "
    "WHERE schemaname = current_schema() AND tablename = 'notes_lexical'"
)

# one branch per query lexeme, each its notes from the index with that lexeme's weight
_HOLDING = f"""
SELECT n.rowid, n.lexemes, ?::float8 AS weight FROM notes n
WHERE {LEXEMES_SQL} @@ ?::tsquery AND n.tenant_id = ? AND n.resource_id = ? AND n.thread_id = ? {{filter}}
"""
_BM25 = f"""
SELECT h.rowid FROM ({{holding}}) AS h GROUP BY h.rowid, h.lexemes
ORDER BY SUM(h.weight) * {K1 + 1} / (1 + {K1} * ({1 - B} + {B} * h.lexemes / ?)) DESC, h.rowid
LIMIT ?
"""


class PgTermStats:
    """Document counts of lexemes and the corpus size, cached until the store has grown past them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stems = StemCache()
        self._df: dict[str, tuple[int, int, int]] = {}  # lexeme -> (notes holding it, change seq, cap counted to)
        self._corpus: tuple[int, float, int] | None = None  # (notes, average length, change seq)
        self._common: tuple[dict[str, float], int] | None = None  # (lexeme -> share of notes, change seq)

    def stems(self, conn: Any, terms: list[str]) -> list[list[str]]:
        """Given terms, return the lexemes PostgreSQL's English configuration indexes each under
        (remembered per term: a recall asks once to choose its terms and again to rank by them)."""

        def stem(unknown: list[str]) -> list[list[str]]:
            found: list[list[str]] = [[] for _ in unknown]
            for i, lexemes in conn.execute(_STEMS, (unknown,)).fetchall():
                found[int(i) - 1] = list(lexemes or [])
            return found

        return self._stems.of(terms, stem)

    def common(self, conn: Any, seq: int) -> dict[str, float]:
        """The most common lexemes of the notes and the share of notes holding each, from the last
        ANALYZE (empty before the first); read again once the store grew by an eighth."""
        with self._lock:
            cached = self._common
        if cached is not None and seq - cached[1] <= max(64, self.corpus(conn, seq)[0] // 8):
            return cached[0]
        row = conn.execute(_COMMON).fetchone()
        found: dict[str, float] = {}
        if row is not None and row[0] is not None and row[1] is not None:
            found = {str(lexeme): float(share) for lexeme, share in zip(row[0], row[1], strict=False)}
        with self._lock:
            self._common = (found, seq)
        return found

    def doc_freq(self, conn: Any, lexemes: set[str], seq: int, cap: int) -> dict[str, int]:
        """Return each lexeme's document count: estimated from the column's statistics for a common
        lexeme, counted (up to ``cap``, a count equal to the cap meaning "at least") for the rest;
        cached until the store grew past it."""
        out: dict[str, int] = {}
        common = self.common(conn, seq)
        notes = self.corpus(conn, seq)[0] if common else 0
        missing: list[str] = []
        for lexeme in lexemes:
            share = common.get(lexeme)
            if share is not None:
                out[lexeme] = min(cap, max(1, round(share * notes)))
                continue
            with self._lock:
                cached = self._df.get(lexeme)
            if (
                cached is not None
                and seq - cached[1] <= stale_after(cached[0], seq)
                and (cached[0] < cached[2] or cached[2] >= cap)
            ):
                out[lexeme] = min(cached[0], cap)
                continue
            missing.append(lexeme)
        if missing:  # one statement each (planned for its own lexeme, so the GIN is used), one round trip
            with conn.raw.pipeline():
                cursors = [conn.execute(_DOC_FREQ, (lexeme, cap)) for lexeme in missing]
            counts = [int(cursor.fetchone()[0]) for cursor in cursors]
            with self._lock:
                if len(self._df) > 200_000:
                    self._df.clear()
                for lexeme, count in zip(missing, counts, strict=True):
                    self._df[lexeme] = (count, seq, cap)
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
        df = self.doc_freq(conn, {s for group in stems for s in group}, seq, max_postings + 1)
        return rarest_terms(terms, stems, df, max_postings=max_postings, min_terms=min_terms)


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
    notes, average = stats.corpus(conn, seq)
    notes = max(notes, 1)
    df = stats.doc_freq(conn, set(lexemes), seq, notes + 1)
    idf = [max(1e-6, math.log((notes - df[x] + 0.5) / (df[x] + 0.5) + 1.0)) for x in lexemes]
    holding = _HOLDING.format(filter=f"AND ({where})" if where else "")
    sql = _BM25.format(holding=" UNION ALL ".join(holding for _ in lexemes))
    per_lexeme = [
        value
        for lexeme, weight in zip(lexemes, idf, strict=True)
        for value in (weight, _tsquery([lexeme]), scope.tenant_id, scope.resource_id, scope.thread_id, *params)
    ]
    # each branch reads its lexeme's notes from the index; parallel workers only slowed these small reads
    with conn.raw.pipeline(), conn.raw.transaction():  # the setting, the ranking and the commit in one round trip
        conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        cursor = conn.execute(sql, (*per_lexeme, max(average, 1.0), limit))
    return [int(row[0]) for row in cursor.fetchall()]
