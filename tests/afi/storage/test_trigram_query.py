"""The trigram queries find every row holding the literals (they may find a few more: the matcher checks).

SQLite: an FTS5 trigram table without positions (as the store's are) finds every row holding them.
PostgreSQL: one ``ILIKE`` per literal, which a ``gin_trgm_ops`` index serves, finds every row holding
the literals in any case the case-insensitive regex of them matches.
"""

from __future__ import annotations

import random
import sqlite3

import pytest
import re2

from afi.regex import Regex, compile_regex
from afi.storage.database import Connection, Database, open_database
from afi.storage.pg_derived_notes import RENDERED_SQL
from afi.storage.pg_trigram import folded, ilike, like_pattern
from afi.storage.trigram import trigram_query

_UNANCHORED = re2._re2.RE2.Anchor.UNANCHORED
AS_COLUMN = 'form COLLATE "C"'  # as the store's columns are: ILIKE folds ASCII letters only

ALPHABET = "abcab ABC\"'*()-:^é日本😀\t"


def _table(texts: list[str]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='trigram', detail=none)")
    conn.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)", list(enumerate(texts, start=1)))
    return conn


def _rows(conn: sqlite3.Connection, expr: str) -> set[int]:
    return {row[0] for row in conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,))}


def test_a_literal_becomes_all_its_trigrams() -> None:
    assert trigram_query(["abc"]) == '"abc"'
    assert trigram_query(['ab"cd']) == '"ab""" AND "b""c" AND """cd"'
    assert trigram_query(["aaaaaa", "xyz", "aaax"]) == '"aaa" AND "xyz" AND "aax"'


def test_every_row_holding_the_literals_is_a_candidate() -> None:
    rng = random.Random(7)
    texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 60))) for _ in range(400)]
    conn = _table(texts)
    tried = missed = extra = 0
    for _ in range(600):
        source = rng.choice([t for t in texts if len(t) >= 3])
        start = rng.randrange(len(source) - 2)
        literal = source[start : start + rng.randint(3, 20)]
        literals = [literal]
        if rng.random() < 0.3:
            other = rng.choice(texts)
            if len(other) >= 3:
                literals.append(other[:3])
        holding = {i for i, text in enumerate(texts, start=1) if all(lit.lower() in text.lower() for lit in literals)}
        found = _rows(conn, trigram_query(literals))
        tried += 1
        missed += len(holding - found)
        extra += len(found - holding)
    assert tried == 600
    assert missed == 0, f"{missed} rows holding the literals were not candidates"
    assert extra < tried * 5  # a candidate is checked against the text, but most should be real


@pytest.mark.parametrize("literal", ["abc", 'a"b"c', "日本語のテキスト", "😀😀😀😀", "NEAR(x, 1)", "AND OR NOT"])
def test_odd_literals_are_queries_fts5_accepts(literal: str) -> None:
    conn = _table([f"before {literal} after", "nothing here"])
    assert _rows(conn, trigram_query([literal])) == {1}


# -- PostgreSQL: one ILIKE per literal, served by a gin_trgm_ops index ------------------------------

# Characters and the case forms a case-insensitive regex (RE2) equates with them; a literal's
# characters are swapped for any of their forms, so the rows must be found in every case.
FORMS = ["aA", "bB", "cC", "kK\u212a", "sS\u017f", "éÉ", "ßẞ", "σΣς", "日", "😀", "%", "_", "\\", " ", "'", "-"]
PG_ALPHABET = "".join(FORMS)
_FORMS_OF = {ch: group for group in FORMS for ch in group}


def _pg_table(url: str, texts: list[str]) -> Database:
    database = open_database(url)
    with database.transaction() as conn:
        conn.execute('CREATE TABLE t (rowid bigint PRIMARY KEY, body text COLLATE "C" NOT NULL)')
        conn.execute(f"CREATE INDEX t_trgm ON t USING gin ({folded('body')} gin_trgm_ops)")
        conn.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)", list(enumerate(texts, start=1)))
        conn.execute("ANALYZE t")
    return database


def _pg_rows(conn: Connection, literals: list[str]) -> set[int]:
    likes = " AND ".join(ilike("body") for _ in literals)
    return {
        int(row[0]) for row in conn.execute(f"SELECT rowid FROM t WHERE {likes}", [like_pattern(x) for x in literals])
    }


def _any_case(literal: str) -> Regex:
    """The case-insensitive regex of exactly ``literal`` (every character a ``\\u{…}`` escape)."""
    return compile_regex("".join(f"\\u{{{ord(ch):X}}}" for ch in literal), "i")


def test_like_patterns_escape_and_widen() -> None:
    assert like_pattern("abc") == "%abc%"
    assert like_pattern("50%_off\\x") == "%50\\%\\_off\\\\x%"
    assert like_pattern("café") == "%caf_%"  # ILIKE under "C" does not equate é and É
    assert like_pattern("kiss") == "%kiss%"  # U+212A and U+017F in the text are read as k and s
    assert like_pattern("\u212a\u017f") == "%__%"
    assert like_pattern("日本😀") == "%日本😀%"  # no case forms: kept
    assert like_pattern("a\x00b") == "%a_b%"


def test_postgres_never_misses_a_row_holding_the_literals_in_any_case(pg_store_url: str) -> None:
    """600 random queries (three in ten with a second literal) over 400 random texts, each character of
    a literal swapped for a random case form, the trigram index forced: 0 rows missed against the
    case-insensitive regex of the literals (9,006 extra rows, 15 a query: a third of the alphabet is
    letters with case forms outside ASCII, which a pattern reads as any character)."""
    rng = random.Random(11)
    texts = ["".join(rng.choice(PG_ALPHABET) for _ in range(rng.randint(0, 60))) for _ in range(400)]
    database = _pg_table(pg_store_url, texts)
    tried = missed = extra = 0
    with database.transaction() as conn:
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = " ".join(
            str(row[0]) for row in conn.execute(f"EXPLAIN SELECT rowid FROM t WHERE {ilike('body')}", ["%abc%"])
        )
        assert "t_trgm" in plan
        for _ in range(600):
            literals = []
            for _ in range(1 if rng.random() < 0.7 else 2):
                source = rng.choice([t for t in texts if len(t) >= 3])
                start = rng.randrange(len(source) - 2)
                piece = source[start : start + rng.randint(3, 20)]
                literals.append("".join(rng.choice(_FORMS_OF[ch]) for ch in piece))
            regexes = [_any_case(literal) for literal in literals]
            holding = {i for i, text in enumerate(texts, start=1) if all(r.find(text) >= 0 for r in regexes)}
            found = _pg_rows(conn, literals)
            tried += 1
            missed += len(holding - found)
            extra += len(found - holding)
    assert tried == 600
    assert missed == 0, f"{missed} rows holding the literals were not candidates"
    assert extra < tried * 20, extra


def test_every_case_form_re2_equates_is_found_by_the_pattern(pg_store_url: str) -> None:
    """Every character with a case form in Python's tables (2,927 on Python 3.11), as a one-character
    case-insensitive RE2 regex over all of them, and every ASCII letter over all of Unicode: 5,907
    (character, form) pairs, and the condition of each character finds each of its forms in a
    ``COLLATE "C"`` text on PostgreSQL (misses: 0)."""
    every = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    cased = [ch for ch in every if ch.lower() != ch or ch.upper() != ch or ch.title() != ch or ch.casefold() != ch]
    pairs: set[tuple[str, str]] = set()
    for haystack, chars in (
        ("".join(cased), cased),
        ("".join(every), [c for c in every if c.isascii() and c.isalpha()]),
    ):
        for ch in chars:
            regex = _any_case(ch)
            pairs.update((ch, form) for form in _all_matches(regex, haystack))
    assert len(cased) > 2500 and len(pairs) > 5000, (len(cased), len(pairs))
    database = open_database(pg_store_url)
    with database.read() as conn:
        row = conn.execute(
            "SELECT count(*) FROM unnest(?::text[], ?::text[]) AS p(form, pattern) "
            f"WHERE NOT ({ilike(AS_COLUMN, 'pattern')})",
            ([form for _, form in sorted(pairs)], [like_pattern(ch) for ch, _ in sorted(pairs)]),
        ).fetchone()
    assert row[0] == 0, f"{row[0]} case forms not matched"


def _all_matches(regex: Regex, haystack: str) -> list[str]:
    data = haystack.encode()
    found, pos = [], 0
    while True:
        start, end = regex.compiled.Match(_UNANCHORED, data, pos, len(data))[0]
        if start < 0:
            return found
        found.append(data[start:end].decode())
        pos = end


@pytest.mark.parametrize(
    ("table", "column", "index"),
    [("notes", RENDERED_SQL, "notes_rendered_folded_trgm"), ("workspace_files", "text", "workspace_files_trgm")],
)
def test_the_store_s_trigram_indexes_serve_grep_s_conditions(
    pg_store_url: str, table: str, column: str, index: str
) -> None:
    """The schema's indexes are built on :func:`folded` word for word: the planner uses them for ``ilike``."""
    database = open_database(pg_store_url)
    with database.transaction() as conn:
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = conn.execute(f"EXPLAIN SELECT 1 FROM {table} WHERE {ilike(column)}", [like_pattern("kelvin")]).fetchall()
    assert index in " ".join(str(row[0]) for row in plan), plan
