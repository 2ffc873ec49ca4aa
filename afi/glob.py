"""A list glob: one meaning in every folder, door and engine (docs/afi.md, "Globs").

Shell patterns (POSIX ``fnmatch``) against one whole name: ``*`` any run, ``?`` one character,
``[abc]`` / ``[a-z]`` a set, ``[!…]`` and ``[^…]`` its complement, ``\\`` takes the next character as
itself, and a ``[`` never closed is itself. Case counts; characters are code points.

:class:`Glob` reads a pattern once. :meth:`Glob.matches` decides, with RE2 (linear in the name, no
cache of compiled patterns). A store that selects names in SQL narrows its candidates with
:attr:`Glob.prefix` and a pattern every matching name passes (:meth:`Glob.like` for PostgreSQL,
:meth:`Glob.sqlite_glob` for SQLite, both case-sensitive); it never decides: the matcher does, so
every engine and every folder lists the same names.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import re2

from afi.errors import InvalidPath

__all__ = ["LIKE_ESCAPE", "MAX_GLOB_CHARS", "Glob"]

MAX_GLOB_CHARS = 4096
LIKE_ESCAPE = "\\"  # the ESCAPE character of :meth:`Glob.like`
_SQL_RUNS = 4  # at most this many stars in a LIKE or GLOB: SQL matches them by backtracking
_LIKE_SPECIAL = re.compile(r"([%_\\])")
_POSIX_CLASS = re.compile(r"\[([:=.])[^\]]*\1\]")  # [:digit:], [=e=], [.a.]
_WHOLE = re2._re2.RE2.Anchor.ANCHOR_BOTH
_MAX_MEM = 8 << 20


class _Star:
    """``*``: any run of characters."""


class _One:
    """``?``: exactly one character."""


@dataclass(frozen=True)
class _Set:
    """``[…]``: one character of ``spans`` (inclusive code point ranges), or of none with ``negate``."""

    negate: bool
    spans: tuple[tuple[str, str], ...]


_Token = str | _Star | _One | _Set  # a str is one literal character
STAR, ONE = _Star(), _One()


class Glob:
    """One glob, read and compiled: a test of a name, and the SQL pre-filter of a store."""

    __slots__ = ("_program", "_tokens", "text")

    def __init__(self, text: str) -> None:
        """Read ``text``.

        Raises:
            InvalidPath: too long, a ``/``, a NUL or a lone surrogate, a set whose range runs backwards,
                a POSIX class (``[:digit:]``), or too complex for RE2 (each message says which).
        """
        _check(text)
        self.text = text
        self._tokens = _parse(text)
        options = re2.Options()
        options.max_mem = _MAX_MEM
        options.log_errors = False
        self._program = re2._re2.RE2(("(?s)" + _regex(self._tokens)).encode(), options)
        if not self._program.ok():
            raise InvalidPath("the glob is too complex: use fewer or smaller [...] sets")

    def __repr__(self) -> str:
        return f"Glob({self.text!r})"

    def matches(self, name: str) -> bool:
        """Given a name, return whether the glob matches all of it."""
        data = name.encode("utf-8", "surrogatepass")
        return bool(self._program.Match(_WHOLE, data, 0, len(data))[0][0] >= 0)

    __call__ = matches

    @property
    def prefix(self) -> str:
        """What every name the glob matches starts with (its literal characters before any wildcard)."""
        out = []
        for token in self._tokens:
            if not isinstance(token, str):
                break
            out.append(token)
        return "".join(out)

    @property
    def prefix_end(self) -> str | None:
        """The least string above every string that starts with :attr:`prefix` in code point (and UTF-8
        byte) order; None when there is none (no prefix, or one of U+10FFFF only)."""
        prefix = self.prefix
        while prefix:
            after = ord(prefix[-1]) + 1
            if after <= 0x10FFFF:
                return prefix[:-1] + chr(0xE000 if 0xD800 <= after <= 0xDFFF else after)
            prefix = prefix[:-1]
        return None

    def like(self) -> str:
        """A ``LIKE`` pattern (escape :data:`LIKE_ESCAPE`) that every name the glob matches matches
        too: a set becomes ``_``, and past :data:`_SQL_RUNS` runs of ``*`` the middle ones are left out
        (a looser pattern, never a stricter one)."""
        return self._loosened("%", lambda ch: _LIKE_SPECIAL.sub(r"\\\1", ch), lambda _: "_")

    def sqlite_glob(self) -> str:
        """A SQLite ``GLOB`` pattern every name the glob matches matches too (case counts, as in
        ``LIKE`` on PostgreSQL, where SQLite's ``LIKE`` ignores ASCII case): a set stays a set where
        SQLite reads it alike, else becomes ``?``; ``*``, ``?`` and ``[`` as characters are ``[*]``,
        ``[?]``, ``[[]``; past :data:`_SQL_RUNS` runs of ``*`` the middle ones are left out."""
        return self._loosened("*", lambda ch: f"[{ch}]" if ch in "*?[" else ch, _sqlite_set)

    def _loosened(self, star: str, literal: Callable[[str], str], one: Callable[[_One | _Set], str]) -> str:
        parts: list[list[str]] = [[]]
        for token in self._tokens:
            if token is STAR:
                parts.append([])
            elif isinstance(token, str):
                parts[-1].append(literal(token))
            elif isinstance(token, _One | _Set):
                parts[-1].append(one(token))
        if len(parts) > _SQL_RUNS + 1:
            parts = [*parts[:_SQL_RUNS], parts[-1]]
        return star.join("".join(part) for part in parts)


def _check(text: str) -> None:
    if len(text) > MAX_GLOB_CHARS:
        raise InvalidPath(f"the glob is {len(text):,} characters long; the limit is {MAX_GLOB_CHARS:,}")
    if "/" in text:
        raise InvalidPath("a glob matches a name within one folder, so it cannot hold '/': list that folder")
    if "\x00" in text:
        raise InvalidPath("the glob holds a NUL character, which no name holds")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidPath("the glob holds a lone surrogate (not a Unicode character)") from None


def _parse(text: str) -> list[_Token]:
    """The glob's tokens; consecutive stars are one."""
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        i += 1
        if ch == "*":
            if not out or out[-1] is not STAR:
                out.append(STAR)
        elif ch == "?":
            out.append(ONE)
        elif ch == "\\":
            out.append(text[i] if i < n else "\\")
            i += 1
        elif ch == "[" and (found := _parse_set(text, i)) is not None:
            token, i = found
            out.append(token)
        else:
            out.append(ch)
    return out


def _parse_set(text: str, i: int) -> tuple[_Set, int] | None:
    """The set whose ``[`` is just before ``i``, and where the glob goes on after its ``]``; None when
    it is never closed (the ``[`` is then itself)."""
    n = len(text)
    start = i
    negate = i < n and text[i] in "!^"
    i += negate
    spans: list[tuple[str, str]] = []
    first = True
    while i < n:
        if text[i] == "]" and not first:
            _check_set(text[start - 1 : i + 1], spans)
            return _Set(negate, tuple(spans)), i + 1
        first = False
        low, i = _member(text, i)
        if i + 1 < n and text[i] == "-" and text[i + 1] != "]":
            high, i = _member(text, i + 1)
            spans.append((low, high))
        else:
            spans.append((low, low))
    return None


def _member(text: str, i: int) -> tuple[str, int]:
    """The set member at ``i`` (``\\`` takes the next character as itself), and the index after it."""
    if text[i] == "\\" and i + 1 < len(text):
        return text[i + 1], i + 2
    return text[i], i + 1


def _check_set(written: str, spans: list[tuple[str, str]]) -> None:
    """Refuse a closed set a person would read otherwise: a range written backwards, a POSIX class."""
    posix = _POSIX_CLASS.search(written[1:])
    if posix:
        raise InvalidPath(f"POSIX classes such as {posix.group(0)} are not supported in a glob: write a range "
                          "such as [0-9], or the characters themselves")  # fmt: skip
    for low, high in spans:
        if low > high:
            raise InvalidPath(f"the range {low}-{high} in {written} runs backwards: write {high}-{low}")


def _regex(tokens: list[_Token]) -> str:
    """The tokens as an RE2 pattern, every character spelt as ``\\x{…}`` so none reads as syntax."""
    out = []
    for token in tokens:
        if token is STAR:
            out.append(".*")
        elif token is ONE:
            out.append(".")
        elif isinstance(token, str):
            out.append(_code(token))
        elif isinstance(token, _Set):
            ranges = "".join(_code(low) + ("" if low == high else "-" + _code(high)) for low, high in token.spans)
            out.append(("[^" if token.negate else "[") + ranges + "]")
    return "".join(out)


def _sqlite_set(token: _One | _Set) -> str:
    """A set as SQLite's GLOB writes it, when it reads it alike (no ``]``, ``^`` or ``-`` in it);
    else, and for ``?``, any one character."""
    if isinstance(token, _One) or any(c in "]^-" for span in token.spans for c in span):
        return "?"
    ranges = "".join(low if low == high else f"{low}-{high}" for low, high in token.spans)
    return ("[^" if token.negate else "[") + ranges + "]"


def _code(ch: str) -> str:
    return f"\\x{{{ord(ch):X}}}"
