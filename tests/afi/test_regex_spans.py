"""``Regex.spans``: every match of a line, as columns (what the web page marks in a hit)."""

from __future__ import annotations

from afi.regex import compile_regex


def test_spans_are_every_match_in_columns() -> None:
    assert compile_regex("un.ts", "i").spans("SI UNITS and units") == [(3, 8), (13, 18)]
    assert compile_regex("é+").spans("aéé b é") == [(1, 3), (6, 7)]  # columns, not UTF-8 bytes
    assert compile_regex("x*").spans("éaxxé") == [(2, 4)]  # empty matches skipped, no endless loop
    assert compile_regex("z").spans("abc") == []
    assert len(compile_regex("a").spans("a" * 500, most=100)) == 100
