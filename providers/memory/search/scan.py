"""Scan one document for matching lines, a piece at a time, within a work budget.

A document is bytes read by offset (:class:`Doc`): a text in memory, or a workspace file read from
disk, whatever its size. It is read :data:`CHUNK` bytes at a time and cut at the last newline, so
the whole lines of each piece are matched together; a line longer than a piece is matched in pieces
that overlap (by the finder's ``overlap``), holding :data:`CHUNK` bytes at most. Line numbers,
columns and the place to resume (a :class:`~.lines.Spot`) are counted across pieces, so they are the
same as if the document were matched whole. Memory stays bounded by the piece, not the document.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from dataclasses import dataclass
from typing import Protocol

from afi.model import MatchContext
from afi.regex import Budget, Paused

from .lines import TEXT_LIMIT, Finder, LineHit, Spot, Stop, chars, cut, cut_around

__all__ = ["CHUNK", "BytesDoc", "Doc", "FileDoc", "scan"]

CHUNK = 1 << 20  # bytes read at a time
TAIL = 1 << 10  # bytes read past a piece of a long line: its match's text, and context for ^ $ \b
CONTEXT_READ = 64 << 10  # bytes read either side of a matching line for its context lines
AROUND = 4 * TEXT_LIMIT  # bytes either side of a match that hold TEXT_LIMIT characters

Scan = Generator[LineHit | Stop, None, "Spot | None"]  # hits, then where the next piece starts (None: stopped)


class Doc(Protocol):
    """A document as a scan reads it: its size, and its bytes by offset."""

    @property
    def size(self) -> int: ...

    def read(self, offset: int, length: int) -> bytes: ...


class BytesDoc:
    """A document held in memory."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)

    def read(self, offset: int, length: int) -> bytes:
        if offset == 0 and length >= self.size:
            return self.data
        return self.data[offset : offset + length]


@dataclass(frozen=True)
class FileDoc:
    """A file open for reading, read where asked (never whole)."""

    fd: int
    size: int

    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self.fd, max(0, min(length, self.size - offset)), offset) if offset < self.size else b""


def scan(doc: Doc, finder: Finder, budget: Budget, spot: Spot, context: int = 0) -> Scan:
    """Given a document and where to start, yield one hit per matching line, in line order.

    Once the budget is spent a :class:`~.lines.Stop` is yielded and nothing more; it is never yielded
    after the last line. Lines have ``context`` lines of context (0 to 10) either side.
    """
    scanner = _Scanner(doc, finder, budget, context)
    where: Spot | None = spot if spot.at >= 0 else _locate(doc, spot.line)
    if where is None or where.at >= doc.size:
        return None
    if where.skip:
        where = yield from scanner.skip(where, None)
    elif where.col > 0:
        where = yield from scanner.long_line(where)
    while where is not None and where.at < doc.size:
        if where.at > spot.at and budget.spent:
            yield Stop(where)
            return None
        where = yield from scanner.piece(where)
    return None


class _Scanner:
    __slots__ = ("budget", "context", "doc", "finder")

    def __init__(self, doc: Doc, finder: Finder, budget: Budget, context: int) -> None:
        self.doc = doc
        self.finder = finder
        self.budget = budget
        self.context = context

    def piece(self, spot: Spot) -> Scan:
        """Match the whole lines of the next piece from ``spot`` (at a line's start); a line longer
        than a piece is matched by :meth:`long_line`."""
        base, line = spot.at, spot.line
        data = self.doc.read(base, CHUNK)
        if not data:
            return None
        end = len(data) if len(data) < CHUNK else data.rfind(b"\n") + 1  # a short read: the end
        if end == 0:
            return (yield from self.long_line(spot))
        at, finder, budget = 0, self.finder, self.budget
        while at < end:
            ahead = finder.ahead(data, at, end, budget)
            line += data.count(b"\n", at, ahead)
            at, moved = ahead, ahead > at
            if at >= end:
                break
            if moved and budget.spent:  # a stop makes progress: else the line is matched first
                yield Stop(Spot(line, base + at))
                return None
            stop = data.find(b"\n", at, end)
            stop = end if stop < 0 else stop
            text = data[at:stop]
            found = finder.within(text, 0, len(text), budget)
            if isinstance(found, Paused):
                yield Stop(Spot(line, base + at + found.offset, col=max(chars(text[: found.offset]), 1)))
                return None
            line += 1
            at = stop + 1
            if found >= 0:
                shown = text.decode("utf-8", "replace")
                column = found if len(shown) == len(text) else chars(text[:found])
                near = self._context(base + at - len(text) - 1, base + at) if self.context else None
                yield LineHit(line, column + 1, cut(shown, column), near, Spot(line, base + at))
            if at < end and budget.spent:
                yield Stop(Spot(line, base + at))
                return None
        return Spot(line, base + end)

    def long_line(self, spot: Spot) -> Scan:
        """Match line ``spot.line + 1`` from ``spot.at`` in pieces of :data:`CHUNK` bytes, each
        overlapping the one before by the finder's ``overlap``, until a match or its end."""
        line, at, col = spot.line, spot.at, spot.col
        start = self._line_start(at) if col > 0 else at  # -1: further back than what was read
        while True:
            lo = max(at - self.finder.overlap, start) if start >= 0 else at - self.finder.overlap
            first = max(lo - 4, start) if start >= 0 else lo - 4  # a character of context before the piece
            want = at - first + CHUNK + TAIL
            data = self.doc.read(first, want)
            newline = data.find(b"\n", at - first)
            ends = newline >= 0 or len(data) < want
            if newline >= 0:
                data = data[:newline]
            stop = len(data) if ends else _char_end(data, len(data) - TAIL)
            found = self.finder.within(data, lo - first, stop, self.budget)
            here = at - first
            if isinstance(found, Paused):
                yield Stop(Spot(line, first + found.offset, col=_column(data, here, col, found.offset)))
                return None
            if found >= 0:
                column = _column(data, here, col, found)
                hit = (column, self._text(first + found, start), start)
                if ends:
                    return (yield from self._long_hit(hit, line, first + stop))
                return (yield from self.skip(Spot(line + 1, first + stop, skip=True), (hit, line)))
            if ends:
                return Spot(line + 1, first + stop + 1)
            col = _column(data, here, col, stop)
            at = first + stop
            if self.budget.spent:
                yield Stop(Spot(line, at, col=col))
                return None

    def skip(self, spot: Spot, pending: tuple[tuple[int, str, int], int] | None) -> Scan:
        """Pass over the rest of line ``spot.line`` from ``spot.at``; then answer the hit ``pending``
        found in it, if any: its column, text and the line's start, and the lines done before it."""
        at = spot.at
        while True:
            data = self.doc.read(at, CHUNK)
            newline = data.find(b"\n")
            self.budget.charge(len(data) if newline < 0 else newline + 1)
            if newline >= 0 or not data:
                end = at + (newline if newline >= 0 else 0)
                if pending is None:
                    return Spot(spot.line, end + 1)
                return (yield from self._long_hit(pending[0], pending[1], end))
            at += len(data)
            if self.budget.spent:
                if pending is not None:
                    (column, text, start), done = pending
                    near = self._context(start, None) if self.context else None
                    yield LineHit(done + 1, column + 1, text, near, Spot(done + 1, at, skip=True))
                yield Stop(Spot(spot.line, at, skip=True))
                return None

    def _long_hit(self, hit: tuple[int, str, int], done: int, end: int) -> Scan:
        """Answer a hit in the long line ``done + 1`` that ends at byte ``end``; go on after it."""
        column, text, start = hit
        after = Spot(done + 1, end + 1)
        yield LineHit(done + 1, column + 1, text, self._context(start, end + 1) if self.context else None, after)
        return after

    def _line_start(self, at: int) -> int:
        """Where the line holding byte ``at`` starts, when within a piece before it (else -1: further
        back than a piece and the finder's overlap)."""
        first = max(0, at - max(CHUNK, self.finder.overlap + 4))
        newline = self.doc.read(first, at - first).rfind(b"\n")
        return first + newline + 1 if newline >= 0 else 0 if first == 0 else -1

    def _text(self, at: int, start: int) -> str:
        """The text of a long line's hit at byte ``at``, the line starting at byte ``start`` (-1: unknown)."""
        lo = max(at - AROUND, start, 0)
        head = self.doc.read(lo, at - lo)
        newline = head.rfind(b"\n")  # the line started after what ``start`` knew
        whole_before = newline >= 0 or lo == start or lo == 0
        tail = self.doc.read(at, AROUND)
        end = tail.find(b"\n")
        whole_after = end >= 0 or len(tail) < AROUND
        before = head[newline + 1 :].decode("utf-8", "replace")
        after = (tail if end < 0 else tail[:end]).decode("utf-8", "replace")
        return cut_around(before, after, whole_before=whole_before, whole_after=whole_after)

    def _context(self, start: int, after: int | None) -> MatchContext:
        """The context lines of the line that starts at byte ``start`` (-1: unknown) and whose next
        line starts at byte ``after`` (None: unknown), each cut as a match's line is. A little is read
        first, more (up to :data:`CONTEXT_READ`) only when that held too few lines."""
        count, size = self.context, self.doc.size
        before: list[str] = []
        if start > 0:
            for reach in (CONTEXT_READ // 16, CONTEXT_READ):
                first = max(0, start - reach)
                lines = self.doc.read(first, start - first - 1).split(b"\n")
                if first == 0 or len(lines) > count:
                    break
            before = [cut(x.decode("utf-8", "replace"), 0) for x in lines[-count:]]
        following: list[str] = []
        if after is not None and after < size:
            for reach in (CONTEXT_READ // 16, CONTEXT_READ):
                lines = self.doc.read(after, reach).split(b"\n")
                if after + reach >= size or len(lines) > count:
                    break
            if after + reach >= size and lines[-1] == b"":
                lines.pop()
            following = [cut(x.decode("utf-8", "replace"), 0) for x in lines[:count]]
        return MatchContext(before=before, after=following)


def _char_end(data: bytes, at: int) -> int:
    """The nearest UTF-8 character start at or after ``at`` (a piece never ends inside a character)."""
    end = at
    while end < min(at + 3, len(data)) and data[end] & 0xC0 == 0x80:
        end += 1
    return end


def _column(data: bytes, here: int, col: int, at: int) -> int:
    """The characters of the line before ``data[at]``, given ``col`` before ``data[here]``."""
    return col + chars(data[here:at]) if at >= here else col - chars(data[at:here])


def _locate(doc: Doc, line: int) -> Spot | None:
    """Where line ``line + 1`` starts (a cursor that gave a line but no byte): counted from the start."""
    at, left = 0, line
    while left > 0:
        data = doc.read(at, CHUNK)
        if not data:
            return None
        found = data.count(b"\n")
        if found < left:
            at, left = at + len(data), left - found
            continue
        cut_at = -1
        for _ in range(left):
            cut_at = data.find(b"\n", cut_at + 1)
        return Spot(line, at + cut_at + 1)
    return Spot(line, at)
