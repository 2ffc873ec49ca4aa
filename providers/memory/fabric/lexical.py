"""Lexical helpers: token normalisation for folding, and FTS5 BM25 queries for the hybrid recall."""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable

__all__ = [
    "STOPWORDS",
    "StemCache",
    "TermStats",
    "bm25_rowids",
    "fts_query",
    "has_words",
    "matching_rowids",
    "normalize_note_text",
    "query_terms",
    "rarest_terms",
    "stale_after",
]

_WORD = re.compile(r"\w+", re.UNICODE)
_ALNUM = re.compile(r"[^\W_]+")  # letters and digits of any script

# Small English list: these terms carry no subject and make BM25 posting lists long.
_STOPWORDS_TEXT = """
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves s t don did didn doesn isn wasn weren
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


def normalize_note_text(text: str) -> str:
    """Given note text, return its lowercase alphanumeric tokens (any script) joined by spaces.

    Two texts with the same normalised form are the same note: punctuation, case and spacing
    rewording is not a contradiction. A text without any (punctuation, emoji) normalises to itself.
    """
    return " ".join(_ALNUM.findall(text.lower())) or text


def has_words(text: str) -> bool:
    """Whether the text holds a letter or digit of any script."""
    return _ALNUM.search(text) is not None


def query_terms(text: str, *, max_terms: int | None = None) -> list[str]:
    """Given text, return its distinct lowercase word terms without stopwords (all of them if every
    term is a stopword); with ``max_terms``, the longest ones, which are the rarest in practice."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        seen.setdefault(word.replace("_", " ").strip(), None)
    terms = [t for t in seen if t]
    kept = [t for t in terms if t not in STOPWORDS] or terms
    if max_terms is not None and len(kept) > max_terms:
        kept = sorted(kept, key=len, reverse=True)[:max_terms]
    return kept


def fts_query(terms: list[str]) -> str | None:
    """Given terms, return an FTS5 MATCH expression OR-ing each as a quoted string, or None."""
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


_STEMS_KEPT = 100_000  # terms whose stems are remembered (a few MB)
_BM25 = "SELECT rowid FROM notes_lexical WHERE notes_lexical MATCH ? ORDER BY bm25(notes_lexical)"


def bm25_rowids(conn: sqlite3.Connection, match: str, *, limit: int | None = None) -> list[int]:
    """Given an FTS5 expression, return the rowids of the notes it matches (the best ``limit`` of
    them, or all), best BM25 first.

    The FTS5 index is read alone, across every scope: the join to ``notes`` that a scope, kind or
    validity filter needs costs a row lookup per match, twice BM25 itself at 10k notes. Recall
    filters with the vector index's mask instead, which knows the scope, kinds and validity already.
    """
    return [row[0] for row in conn.execute(f"{_BM25} LIMIT ?", (match, -1 if limit is None else limit))]


def matching_rowids(conn: sqlite3.Connection, match: str, limit: int) -> list[int] | None:
    """Given an FTS5 expression, return the rowids of every note it matches, in no order; None when
    there are more than ``limit``."""
    rows = [row[0] for row in conn.execute("SELECT rowid FROM notes_lexical WHERE notes_lexical MATCH ? LIMIT ?",
                                           (match, limit + 1))]  # fmt: skip
    return rows if len(rows) <= limit else None


def stale_after(count: int, seq: int) -> int:
    """How many changes a cached document count of ``count`` stays good for, the store's change seq being
    ``seq``: until it may be off by its own size, or by a 256th of the store's changes up to 1,024 (a
    note's rare words were counted again every 64 writes, most of a write's word-index time at a million)."""
    return max(64, count, min(seq >> 8, 1024))


def rarest_terms(terms: list[str], stems: list[list[str]], df: dict[str, int], *, max_postings: int,
                 min_terms: int) -> list[str]:  # fmt: skip
    """Given terms, the stems each is indexed under and the stems' document counts, return the rarest
    terms (at least ``min_terms``, in their order) whose summed counts stay under ``max_postings``;
    a term costs its commonest stem. The rule both engines' term statistics apply."""
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


class StemCache:
    """Each term's stems (a fixed function of the term, so never stale), remembered for the next
    query; forgotten all at once past ``_STEMS_KEPT`` terms."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stems: dict[str, list[str]] = {}

    def of(self, terms: list[str], stem: Callable[[list[str]], list[list[str]]]) -> list[list[str]]:
        """Given terms and how to stem those not remembered yet, return each term's stems."""
        with self._lock:
            known = {t: self._stems[t] for t in terms if t in self._stems}
        unknown = [t for t in dict.fromkeys(terms) if t not in known]
        if unknown:
            found = dict(zip(unknown, stem(unknown), strict=True))
            known.update(found)
            with self._lock:
                if len(self._stems) + len(found) > _STEMS_KEPT:
                    self._stems.clear()
                self._stems.update(found)
        return [list(known[t]) for t in terms]


class TermStats:
    """Document frequencies of the BM25 index's terms, so queries can leave out the terms whose
    posting lists are long: BM25 over a term found in most notes costs much and ranks little.

    Terms are stemmed by FTS5 itself (a private in-memory porter table); frequencies are cached
    and looked up again once the store has grown by more than the cached count.
    """

    def __init__(self) -> None:
        self._stemmer = sqlite3.connect(":memory:", check_same_thread=False)
        self._stemmer.execute("CREATE VIRTUAL TABLE s USING fts5(t, tokenize='porter unicode61')")
        self._stemmer.execute("CREATE VIRTUAL TABLE sv USING fts5vocab(s, 'instance')")
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[int, int]] = {}
        self._stems = StemCache()

    def stems(self, terms: list[str]) -> list[list[str]]:
        """Given terms, return the porter stems FTS5 indexes each under (remembered per term)."""
        return self._stems.of(terms, self._stem)

    def _stem(self, terms: list[str]) -> list[list[str]]:
        with self._lock:
            rows = [(i + 1, t) for i, t in enumerate(terms)]
            self._stemmer.executemany("INSERT INTO s (rowid, t) VALUES (?, ?)", rows)
            rows = self._stemmer.execute("SELECT doc, term FROM sv ORDER BY doc, offset").fetchall()
            self._stemmer.execute("DELETE FROM s")
        found: list[list[str]] = [[] for _ in terms]
        for doc, term in rows:
            found[doc - 1].append(term)
        return found

    def doc_freq(self, conn: sqlite3.Connection, stems: set[str], seq: int) -> dict[str, int]:
        """Return each stem's document count (cached until the store grew past it)."""
        out: dict[str, int] = {}
        missing: list[str] = []
        for stem in stems:
            cached = self._cache.get(stem)
            if cached is not None and seq - cached[1] <= stale_after(cached[0], seq):
                out[stem] = cached[0]
            else:
                missing.append(stem)
        if missing:
            conn.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.lexical_vocab USING fts5vocab(main, notes_lexical, 'row')"
            )
            found = dict(
                conn.execute(
                    f"SELECT term, doc FROM temp.lexical_vocab WHERE term IN ({', '.join('?' * len(missing))})", missing
                ).fetchall()
            )
            if len(self._cache) > 200_000:
                self._cache.clear()
            for stem in missing:
                out[stem] = int(found.get(stem, 0))
                self._cache[stem] = (out[stem], seq)
        return out

    def select(self, conn: sqlite3.Connection, terms: list[str], *, seq: int, max_postings: int,
               min_terms: int = 1) -> list[str]:  # fmt: skip
        """Given query terms, return the rarest ones (at least ``min_terms``) whose summed document
        counts stay under ``max_postings``; rare terms always stay, whatever the store size."""
        if not terms:
            return []
        stems = self.stems(terms)
        df = self.doc_freq(conn, {s for group in stems for s in group}, seq)
        return rarest_terms(terms, stems, df, max_postings=max_postings, min_terms=min_terms)
