"""Line matching for ``exact`` and ``regex`` search, and the literals that narrow a regex's candidates.

Matching is grep's: line by line, 1-based line and column, the line's text cut to about 256
characters around the match, optional context lines.
"""

from __future__ import annotations

import re
import re._constants as sre_constants  # the stdlib regex parser (public as sre_parse before 3.11)
import re._parser as sre_parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from afi.errors import InvalidPath
from afi.model import MatchContext

__all__ = ["TEXT_LIMIT", "Finder", "LineHit", "compile_regex", "find_lines", "required_literals", "substring_finder"]

TEXT_LIMIT = 256
_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "u": 0}
_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")

Finder = Callable[[str], int]  # given a line, return the 0-based column of the first match or -1


@dataclass(frozen=True)
class LineHit:
    line: int
    column: int
    text: str
    context: MatchContext | None


def substring_finder(needle: str) -> Finder:
    """Case-sensitive substring search, as AFI's ``exact`` mode defines it."""
    return lambda line: line.find(needle)


def compile_regex(pattern: str, flags: str = "") -> re.Pattern[str]:
    """Given an ECMAScript-style pattern and flags from ``i m s u``, return a compiled regex.

    Raises:
        InvalidPath: unknown flag or a pattern that does not compile (the draft's code for a bad
            query; the message says the query, not the path, is at fault).
    """
    bits = 0
    for flag in flags:
        if flag not in _FLAGS:
            raise InvalidPath(f"the search query is invalid: unknown regex flag {flag!r} (allowed: i, m, s, u)")
        bits |= _FLAGS[flag]
    translated = _NAMED_GROUP.sub("(?P<", pattern)  # JS (?<name>…) is Python (?P<name>…)
    try:
        return re.compile(translated, bits)
    except re.error as err:
        raise InvalidPath(f"the search query is invalid: the regex does not compile ({err})") from None


def regex_finder(regex: re.Pattern[str]) -> Finder:
    def find(line: str) -> int:
        match = regex.search(line)
        return -1 if match is None else match.start()

    return find


def find_lines(text: str, finder: Finder, *, context: int = 0) -> Iterator[LineHit]:
    """Given a document, yield one hit per matching line, in line order."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for index, line in enumerate(lines):
        column = finder(line)
        if column < 0:
            continue
        ctx = None
        if context > 0:
            ctx = MatchContext(
                before=[_cut(x, 0) for x in lines[max(0, index - context) : index]],
                after=[_cut(x, 0) for x in lines[index + 1 : index + 1 + context]],
            )
        yield LineHit(index + 1, column + 1, _cut(line, column), ctx)


def _cut(line: str, column: int) -> str:
    """Cut a long line to about TEXT_LIMIT characters, keeping the match in view, marking cuts with …."""
    if len(line) <= TEXT_LIMIT:
        return line
    start = max(0, min(column - TEXT_LIMIT // 4, len(line) - TEXT_LIMIT + 1))
    end = start + TEXT_LIMIT - 1
    head = "…" if start > 0 else ""
    tail = "…" if end < len(line) else ""
    if head:
        start += 1
    return head + line[start:end] + tail


def required_literals(regex: re.Pattern[str]) -> list[str]:
    """Given a compiled regex, return literal strings every match must contain (longest first).

    Only the top-level sequence is read; an alternation or a repeat ends a literal run. An empty
    list means the pattern has no usable literal and the caller must scan.
    """
    try:
        parsed = sre_parse.parse(regex.pattern, regex.flags & ~re.UNICODE)
    except re.error:  # pragma: no cover - already compiled once
        return []
    runs: list[str] = []
    current: list[str] = []
    for op, arg in parsed:
        if op is sre_constants.LITERAL:
            current.append(chr(arg))
            continue
        if op is sre_constants.SUBPATTERN and arg[-1] and _only_literals(arg[-1]):
            current.extend(chr(a) for _, a in arg[-1])
            continue
        if current:
            runs.append("".join(current))
            current = []
    if current:
        runs.append("".join(current))
    return sorted((r for r in runs if len(r) >= 3), key=len, reverse=True)


def _only_literals(sub: sre_parse.SubPattern) -> bool:
    return all(op is sre_constants.LITERAL for op, _ in sub)
