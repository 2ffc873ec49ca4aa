"""Line matching for ``exact`` and ``regex`` search, within a work budget.

Matching is grep's: line by line, 1-based line and column, the line's text cut to about 256
characters around the match, optional context lines. Regexes run on RE2 (:mod:`afi.regex`), in
time linear in the text. Runs of short lines are first searched as one block (up to
:data:`~afi.regex.WINDOW` bytes, one call) and skipped when the block has no match; the lines
left are matched one by one. :func:`find_lines` charges the work to a :class:`~afi.regex.Budget`
and stops, with the position to resume at, once it is spent.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from afi.model import MatchContext
from afi.regex import WINDOW, Budget, Paused, Regex, compile_regex

__all__ = [
    "TEXT_LIMIT",
    "Finder",
    "LineHit",
    "RegexFinder",
    "Stop",
    "SubstringFinder",
    "compile_regex",
    "find_lines",
]

TEXT_LIMIT = 256
FIRST_BLOCK = 256  # characters


class Finder(Protocol):
    """How one kind of query finds its matches in a document's lines."""

    def first(self, line: str, start: int, budget: Budget) -> int | Paused:
        """Given a line, a byte offset to resume at and the budget: the 0-based column of the first
        match, -1 for none, or :class:`~afi.regex.Paused` when the budget ran out in the line."""

    def skip(self, lines: list[str], index: int, budget: Budget) -> int:
        """Given the lines and where to look from, return the first line index that may match
        (``len(lines)`` for none); lines before it do not. Stops early once the budget is spent."""


@dataclass(frozen=True)
class LineHit:
    line: int
    column: int
    text: str
    context: MatchContext | None


@dataclass(frozen=True)
class Stop:
    """The budget ran out: lines up to ``line`` are done, and line ``line + 1`` resumes at byte ``offset``."""

    line: int
    offset: int = 0


class SubstringFinder:
    """Case-sensitive substring search, as AFI's ``exact`` mode defines it (``str.find`` is linear)."""

    def __init__(self, needle: str) -> None:
        self.needle = needle

    def first(self, line: str, start: int, budget: Budget) -> int:
        budget.charge(len(line))
        return line.find(self.needle)

    def skip(self, lines: list[str], index: int, budget: Budget) -> int:
        while index < len(lines) and not budget.spent:
            end = _block_end(lines, index)
            block = "\n".join(lines[index:end])
            budget.charge(len(block))
            at = block.find(self.needle)
            if at >= 0:
                return index + block.count("\n", 0, at)
            index = end
        return index


class RegexFinder:
    """An RE2 regex, one line at a time (in windows when long), blocks of short lines first.

    A block grows from :data:`FIRST_BLOCK` characters, doubling while blocks find nothing (up to
    :data:`~afi.regex.WINDOW` bytes), and starts small again after one finds a match, so lines
    that mostly match cost little more than line by line.
    """

    def __init__(self, regex: Regex) -> None:
        self.regex = regex
        self.limit = FIRST_BLOCK

    def first(self, line: str, start: int, budget: Budget) -> int | Paused:
        return self.regex.first_match(line, start, budget)

    def skip(self, lines: list[str], index: int, budget: Budget) -> int:
        while index < len(lines) and not budget.spent:
            end = _block_end(lines, index, self.limit)
            data = "\n".join(lines[index:end]).encode("utf-8", "surrogatepass")
            if len(data) > WINDOW:  # wide characters: at most 4 bytes each
                end = _block_end(lines, index, WINDOW // 4)
                data = "\n".join(lines[index:end]).encode("utf-8", "surrogatepass")
            if end == index + 1:
                return index  # a line alone: first() matches it, in windows when it is long
            at = self.regex.first_in_block(data)
            budget.charge(len(data))
            if at == -2:
                return index
            if at >= 0:
                self.limit = FIRST_BLOCK
                return index + data.count(b"\n", 0, at)
            self.limit = min(self.limit * 2, WINDOW)
            index = end
        return index


def _block_end(lines: list[str], index: int, limit: int = WINDOW) -> int:
    """The end of the run of whole lines from ``index`` within ``limit`` characters (at least one line)."""
    size, end = len(lines[index]), index + 1
    while end < len(lines) and size + 1 + len(lines[end]) <= limit:
        size += 1 + len(lines[end])
        end += 1
    return end


def find_lines(
    text: str, finder: Finder, budget: Budget, *, context: int = 0, after: int = 0, offset: int = 0
) -> Iterator[LineHit | Stop]:
    """Given a document, yield one hit per matching line after line ``after``, in line order.

    Line ``after + 1`` starts at byte ``offset``. Once the budget is spent a :class:`Stop` is yielded
    and nothing more; it is never yielded after the last line.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    index = max(after, 0)
    while index < len(lines):
        resume = offset if index == after else 0
        if resume == 0:
            ahead = finder.skip(lines, index, budget)
            if ahead >= len(lines):
                return
            if ahead > index and budget.spent:
                yield Stop(ahead)
                return
            index = ahead
        line = lines[index]
        column = finder.first(line, resume, budget)
        if isinstance(column, Paused):
            yield Stop(index, column.offset)
            return
        if column >= 0:
            ctx = None
            if context > 0:
                ctx = MatchContext(
                    before=[_cut(x, 0) for x in lines[max(0, index - context) : index]],
                    after=[_cut(x, 0) for x in lines[index + 1 : index + 1 + context]],
                )
            yield LineHit(index + 1, column + 1, _cut(line, column), ctx)
        if budget.spent and index + 1 < len(lines):
            yield Stop(index + 1)
            return
        index += 1


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
