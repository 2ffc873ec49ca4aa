"""The trigram query finds every row the full phrase finds (it may find a few more: the matcher checks)."""

from __future__ import annotations

import random
import sqlite3

import pytest

from afi.storage.trigram import trigram_query

ALPHABET = "abcab ABC\"'*()-:^é日本😀\t"


def _table(texts: list[str]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='trigram')")
    conn.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)", list(enumerate(texts, start=1)))
    return conn


def _rows(conn: sqlite3.Connection, expr: str) -> set[int]:
    return {row[0] for row in conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,))}


def test_a_literal_becomes_pieces_within_a_window() -> None:
    assert trigram_query(["abc"]) == '"abc"'
    assert trigram_query(['ab"cdef']) == 'NEAR("ab""" "cde" "def", 7)'
    assert trigram_query(["aaaaaa", "xyz"]) == '"aaa" AND "xyz"'


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
