"""afi.glob: the rules of docs/afi.md, "Globs", one case at a time; shell patterns as fnmatch reads
them wherever its rules and ours agree; refusals in words; the SQL narrowing a store asks.

The random cases are seeded, so a failure names a case that replays.
"""

from __future__ import annotations

import fnmatch
import random

import pytest

from afi.errors import InvalidPath
from afi.glob import Glob

# (glob, name, matches?) written from the documented rules
RULES = [
    ("*", "", True), ("*", ".afiignore", True), ("**", "a", True), ("a*", "a", True), ("*a", "ba", True),
    ("note", "note.md", False), ("note*", "note.md", True),
    ("?", "", False), ("?", "é", True), ("?", "日", True), ("?", "ab", False), ("?", "\n", True),
    ("*.MD", "a.md", False), ("[a-z]", "B", False),
    ("[abc]", "b", True), ("[abc]", "d", False), ("[a-c]", "c", True), ("[a-c]", "-", False),
    ("[!abc]", "d", True), ("[!abc]", "a", False), ("[^abc]", "d", True), ("[^abc]", "^", True),
    ("[^abc]", "a", False), ("[]x]", "]", True), ("[]x]", "x", True), ("[!]]", "]", False), ("[!]]", "a", True),
    ("[a-]", "-", True), ("[-a]", "-", True), ("[a-]", "b", False), ("[\\]]", "]", True), ("[a\\-z]", "b", False),
    ("[a\\-z]", "-", True), ("[\\^]", "^", True), ("[\\^]", "a", False), ("[[]", "[", True), ("[[.]", ".", True),
    ("\\*", "*", True), ("\\*", "a", False), ("\\?", "?", True), ("\\?", "a", False), ("\\[a]", "[a]", True),
    ("\\\\", "\\", True), ("a\\", "a\\", True), ("\\a", "a", True),
    ("a[b", "a[b", True), ("a[b*", "a[bc", True), ("a[b*", "ab", False), ("[", "[", True), ("[!", "[!", True),
    ("[]", "[]", True), ("[!]", "[!]", True), ("[a-", "[a-", True), ("[a-\\", "[a-\\", True),
    ("[à-ÿ]", "é", True), ("[α-ω]", "λ", True), ("[α-ω]", "Λ", False), ("é", "e\u0301", False),
    ("*x*y*", "axbyc", True), ("*x*y*", "aybxc", False),
]  # fmt: skip


@pytest.mark.parametrize(("glob", "name", "expected"), RULES)
def test_each_rule(glob: str, name: str, expected: bool) -> None:
    assert Glob(glob).matches(name) is expected


def test_shell_patterns_match_as_fnmatch_does_where_the_rules_agree() -> None:
    """3,000 random globs x 20 names against fnmatch.fnmatchcase, with the pieces both read alike (no
    backslash, no ^ opening a set): differences 0. A range the pieces write backwards is refused instead."""
    rng = random.Random(7)
    pieces = ["a", "b", ".", "*", "?", "[ab]", "[!a]", "[a-c]", "[]a]", "[!]", "[", "]", "-", "é", "[a^]"]
    differences, tried, backwards = [], 0, 0
    for _ in range(3000):
        glob = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        try:
            test = Glob(glob)
        except InvalidPath as err:  # pieces can meet as a range written backwards: "[!]-[a-c]" is ]-[
            assert "runs backwards" in err.message
            backwards += 1
            continue
        for _ in range(20):
            name = "".join(rng.choice("abc.-]é^\n[!") for _ in range(rng.randint(0, 6)))
            tried += 1
            if test.matches(name) != fnmatch.fnmatchcase(name, glob):
                differences.append((glob, name))
    assert differences == [] and tried >= 59_000 and backwards < 50, (tried, backwards)


@pytest.mark.parametrize(
    ("glob", "says"),
    [
        ("x" * 4097, "4,097 characters long; the limit is 4,096"),
        ("a/b", "cannot hold '/'"),
        ("a\x00", "NUL"),
        ("a\ud800", "lone surrogate"),
        ("[z-a]", "the range z-a in [z-a] runs backwards: write a-z"),
        ("x[b-a-c]", "runs backwards"),
        ("[[:digit:]]", "[:digit:] are not supported"),
        ("[[=e=]]", "not supported"),
    ],
)
def test_unusable_globs_are_refused_saying_why(glob: str, says: str) -> None:
    with pytest.raises(InvalidPath, match=None) as raised:
        Glob(glob)
    assert says in raised.value.message


def test_a_set_that_is_never_closed_is_read_as_characters_and_refuses_nothing() -> None:
    assert Glob("[z-a").matches("[z-a") and Glob("x[[:digit:").matches("x[[:digit:")
    assert Glob("x" * 4096).matches("x" * 4096)


@pytest.mark.parametrize(
    ("glob", "prefix", "end", "like", "sqlite_glob"),
    [
        ("abc*", "abc", "abd", "abc%", "abc*"),
        ("*abc", "", None, "%abc", "*abc"),
        ("a?c[de]f", "a", "b", "a_c_f", "a?c[de]f"),
        ("[!a-c]x", "", None, "_x", "[^a-c]x"),
        ("[]a]x[a^]y[!-]", "", None, "_x_y_", "?x?y?"),  # sets SQLite would read otherwise: any character
        ("50%_\\*x\\?\\[", "50%_*x?[", "50%_*x?\\", "50\\%\\_*x?[", "50%_[*]x[?][[]"),
        ("back\\\\slash", "back\\slash", "back\\slasi", "back\\\\slash", "back\\slash"),
        ("a\U0010ffff*", "a\U0010ffff", "b", "a\U0010ffff%", "a\U0010ffff*"),
        ("\U0010ffff\U0010ffff*", "\U0010ffff\U0010ffff", None, "\U0010ffff\U0010ffff%", "\U0010ffff\U0010ffff*"),
        ("\ud7ff*", "\ud7ff", "\ue000", "\ud7ff%", "\ud7ff*"),
        ("a*b*c*d*e*f*g", "a", "b", "a%b%c%d%g", "a*b*c*d*g"),
        ("a**b", "a", "b", "a%b", "a*b"),
    ],
)
def test_the_narrowing_a_store_asks(glob: str, prefix: str, end: str | None, like: str, sqlite_glob: str) -> None:
    """Its literal prefix, the least string above every name that starts with it, a LIKE and a SQLite
    GLOB (at most four stars, the middle runs left out)."""
    parsed = Glob(glob)
    assert (parsed.prefix, parsed.prefix_end, parsed.like(), parsed.sqlite_glob()) == (prefix, end, like, sqlite_glob)
