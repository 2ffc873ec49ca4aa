"""A listing's glob in SQLite ``GLOB`` syntax as the PostgreSQL regex that matches the same names.

SQLite asks a glob of a listing's names itself; PostgreSQL has no ``GLOB``, so :class:`.notes_view.NotesView`
asks ``~`` with the regex :func:`glob_regex` writes.
"""

from __future__ import annotations

__all__ = ["glob_regex"]


def glob_regex(glob: str) -> str | None:
    """Given a listing's glob in SQLite ``GLOB`` syntax, return the PostgreSQL regex (``~``) that matches
    the same names, or None when the glob matches none (an unclosed ``[``).

    ``*`` is any run of characters, ``?`` one character, ``[…]`` one character of a class (``^`` first
    negates it, ``]`` first is a member, ``a-z`` a range); anything else stands for itself, with no
    escape character. The regex is anchored at both ends and spells every character but an ASCII letter
    or digit as a ``\\U`` escape, so no name can be read as regex syntax.
    """
    out = ["^"]
    i, n = 0, len(glob)
    while i < n:
        ch = glob[i]
        i += 1
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            found = _glob_class(glob, i)
            if found is None:
                return None
            text, i = found
            out.append(text)
        else:
            out.append(_literal(ch))
    out.append("$")
    return "".join(out)


def _glob_class(glob: str, i: int) -> tuple[str, int] | None:
    """The class that opens before ``i`` as a regex bracket expression, and where the glob goes on;
    None when it is never closed. Read as SQLite reads it: a ``-`` between two characters makes a
    range (empty when reversed: its first character stays a member), and ends the run it closes."""
    n = len(glob)
    negate = i < n and glob[i] == "^"
    i += 1 if negate else 0
    spans: list[tuple[str, str]] = []
    if i < n and glob[i] == "]":
        spans.append(("]", "]"))
        i += 1
    prior: str | None = None
    while i < n and glob[i] != "]":
        ch = glob[i]
        i += 1
        if ch == "-" and prior is not None and i < n and glob[i] != "]":
            spans.append((prior, glob[i]))
            prior = None
            i += 1
        else:
            spans.append((ch, ch))
            prior = ch
    if i >= n:
        return None
    items = "".join(_code(low) + ("" if low == high else "-" + _code(high)) for low, high in spans if low <= high)
    return ("[^" if negate else "[") + items + "]", i + 1


def _literal(ch: str) -> str:
    return ch if ch.isascii() and ch.isalnum() else _code(ch)


def _code(ch: str) -> str:
    return f"\\U{ord(ch):08X}"
