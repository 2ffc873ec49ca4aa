"""What ``exact`` and ``regex`` search match with, over bytes, and what one matching line answers.

Matching is grep's: line by line, 1-based line and column (in characters), the line's text cut to
about 256 characters around the match. A :class:`Finder` works on UTF-8 bytes, so a document in
memory and a file read from disk in pieces (:mod:`.scan`) are matched the same way; bytes that are
not UTF-8 match no character, and are shown as U+FFFD. Runs of short lines are first searched as
one block (up to :data:`~afi.regex.WINDOW` bytes, one call) and skipped when the block has no match;
the lines left are matched one by one. Regexes run on RE2 (:mod:`afi.regex`), in time linear in the
text, and long lines are matched in windows, so each call into RE2 is bounded.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from afi.model import MatchContext
from afi.regex import OVERLAP, WINDOW, Budget, Paused, Regex, compile_regex

__all__ = [
    "TEXT_LIMIT",
    "Finder",
    "LineHit",
    "RegexFinder",
    "Spot",
    "Stop",
    "SubstringFinder",
    "chars",
    "compile_regex",
    "cut",
    "cut_around",
]

TEXT_LIMIT = 256
FIRST_BLOCK = 256  # bytes


class Finder(Protocol):
    """How one kind of query finds its matches in a document's bytes."""

    overlap: int  # how many bytes two pieces of a long line searched one after the other must share

    def ahead(self, data: bytes, start: int, end: int, budget: Budget) -> int:
        """Given whole lines ``data[start:end]`` (``start`` where a line starts, ``end`` where one ends,
        before or after its newline), return where the first line that may match starts (``end`` for
        none); lines before it do not match. Returns sooner, at a line's start, once the budget is spent."""

    def within(self, data: bytes, start: int, end: int, budget: Budget) -> int | Paused:
        """Given bytes of one line, no newline among them: the byte offset of the leftmost match
        lying within ``data[start:end]`` (bytes around it are context), -1 for none, or
        :class:`~afi.regex.Paused` when the budget ran out inside the piece."""


class Spot(NamedTuple):
    """Where a scan of a document goes on: ``line`` lines are done and the next is read from byte
    ``at``, where it starts unless ``col`` (its characters before ``at``) says the scan stopped inside
    it; ``skip``: ``at`` lies inside line ``line``, already answered, whose rest is passed over first."""

    line: int
    at: int
    col: int = 0
    skip: bool = False


class LineHit(NamedTuple):
    """A matching line: its number, the match's column, its text cut around it, and where the scan
    goes on after it."""

    line: int
    column: int
    text: str
    context: MatchContext | None
    after: Spot


class Stop(NamedTuple):
    """The budget ran out: the scan goes on from ``spot``."""

    spot: Spot


class SubstringFinder:
    """Case-sensitive substring search, as AFI's ``exact`` mode defines it (``bytes.find`` is linear)."""

    def __init__(self, needle: str) -> None:
        self.needle = needle.encode("utf-8")
        self.overlap = len(self.needle)

    def ahead(self, data: bytes, start: int, end: int, budget: Budget) -> int:
        at = data.find(self.needle, start, end)
        budget.charge((end if at < 0 else at) - start + 1)
        return end if at < 0 else data.rfind(b"\n", start, at) + 1 or start

    def within(self, data: bytes, start: int, end: int, budget: Budget) -> int:
        budget.charge(end - start + 1)
        return data.find(self.needle, start, end)


class RegexFinder:
    """An RE2 regex: blocks of whole lines first, then one line at a time (in windows when long).

    A block grows from :data:`FIRST_BLOCK` bytes, doubling while blocks find nothing (up to
    :data:`~afi.regex.WINDOW`), and starts small again after one finds a match, so lines that mostly
    match cost little more than line by line.
    """

    def __init__(self, regex: Regex) -> None:
        self.regex = regex
        self.limit = FIRST_BLOCK
        self.overlap = OVERLAP

    def ahead(self, data: bytes, start: int, end: int, budget: Budget) -> int:
        while start < end:
            if end - start <= self.limit:
                stop = end - 1 if data[end - 1] == 0x0A else end
            else:
                stop = data.rfind(b"\n", start, start + self.limit)
                if stop < 0:
                    return start  # a line longer than the block: within() matches it alone, in windows
            if data.find(b"\n", start, stop) < 0:
                return start  # a line alone: within() matches it for the same cost
            at = self.regex.block_at(data, start, stop)
            budget.charge(stop - start + 1)
            if at == -2:
                return start
            if at >= 0:
                self.limit = FIRST_BLOCK
                return min(data.rfind(b"\n", start, at) + 1 or start, end)
            self.limit = min(self.limit * 2, WINDOW)
            start = stop + 1
            if budget.spent:
                break
        return min(start, end)

    def within(self, data: bytes, start: int, end: int, budget: Budget) -> int | Paused:
        return self.regex.first_in(data, start, end, budget)


def chars(data: bytes) -> int:
    """How many characters UTF-8 bytes show as (an invalid sequence is one U+FFFD)."""
    return len(data) if data.isascii() else len(data.decode("utf-8", "replace"))


def cut(line: str, column: int) -> str:
    """Cut a long line to about TEXT_LIMIT characters, keeping the match in view, marking cuts with …."""
    if len(line) <= TEXT_LIMIT:
        return line
    return cut_around(line[:column], line[column:], whole_before=True, whole_after=True)


def cut_around(before: str, after: str, *, whole_before: bool, whole_after: bool) -> str:
    """Given the characters of a line before a match and from it (all of them when ``whole_*``, else
    at least TEXT_LIMIT of each next to the match), return the line's text as :func:`cut` shows it."""
    column = len(before)
    known = column + len(after)  # the line's length when both sides are whole, a bound otherwise
    start = max(0, column - TEXT_LIMIT // 4)
    if whole_after:
        start = max(0, min(start, known - TEXT_LIMIT + 1))
    end = start + TEXT_LIMIT - 1
    head = "…" if start > 0 or not whole_before else ""
    tail = "…" if end < known or not whole_after else ""
    if head:
        start += 1
    line = before + after
    return head + line[start:end] + tail
