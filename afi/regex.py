"""Patterns from callers, compiled for RE2: linear-time matching, bounded size, refusals in words.

A caller's regex is ECMAScript-flavoured (flags ``i m s u``, ``(?<name>…)``, ``\\uXXXX``). One linear
pass over it (:func:`afi.regex_scan.scan`) translates it to RE2 syntax, refuses what RE2 cannot do (backreferences,
lookaround, atomic groups, possessive repeats) with a message a person understands, measures how
deep its groups nest and collects the literals every match must contain, for the trigram index.
The stdlib's regex parser is not used for that: it recurses once per group level and reads RE2-only
syntax (``[[:alpha:]]``, ``\\Q…\\E``, ``\\pL``) differently, which would make it claim literals a
match does not need, and so miss matches.

RE2 then compiles it through the binding's ``_re2.RE2`` object, not ``re2.compile``: that one
caches 128 compiled patterns, each keeping up to ``max_mem`` of DFA memory (a stream of distinct
patterns held 400 MB), and wraps each match in a generator (3.9 µs a line against 1.1). A pattern
whose program is over :data:`MAX_PROGRAM_SIZE` instructions is refused: RE2 is linear in the text,
but with a factor up to the program size when its DFA gives way to the NFA (about 3 ns per byte and
instruction). Lines are matched in windows of :data:`WINDOW` bytes (overlapping by :data:`OVERLAP`),
so one call into RE2 costs at most about 0.5 s whatever the line; RE2 releases the GIL while it runs.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Any, Literal

import re2

from afi.errors import InvalidPath, TooLarge
from afi.regex_scan import ENGINE, MAX_NESTING, scan

__all__ = [
    "ENGINE",
    "MAX_NESTING",
    "MAX_PATTERN_CHARS",
    "MAX_PROGRAM_SIZE",
    "OVERLAP",
    "WINDOW",
    "Budget",
    "Paused",
    "Regex",
    "check_query",
    "compile_regex",
]

MAX_PATTERN_CHARS = 4096  # a regex or an exact query (a list glob: afi.glob)
MAX_PROGRAM_SIZE = 10_000  # RE2 instructions: bounds the NFA's cost per byte
MAX_MEM = 8 << 20  # RE2's budget for the program and its DFA cache (its default)
WINDOW = 16 << 10  # bytes of a line given to RE2 in one call
OVERLAP = 4 << 10  # bytes the next window repeats, so a match of up to this length is never cut
_SIMPLER = "use fewer or smaller repeats ({n}) and Unicode classes (\\p…)"

_FLAGS = {"i": "i", "m": "m", "s": "s", "u": ""}
_UNANCHORED = re2._re2.RE2.Anchor.UNANCHORED
_UNBLOCKABLE = re.compile(r"\\[Az]|\(\?[a-zA-Z]*-[a-zA-Z]*m")  # may be read in a backslash pair: then only slower
_WHOLE = re2._re2.RE2.Anchor.ANCHOR_BOTH


class Budget:
    """A deadline and a count of bytes for one call's matching; spent once either runs out.

    It never reports spent before some work was charged, so every call makes progress.
    """

    def __init__(self, seconds: float = math.inf, max_bytes: float = math.inf) -> None:
        self.deadline = time.monotonic() + seconds
        self.left = max_bytes
        self.charged = False

    def charge(self, scanned: int) -> None:
        self.left -= scanned
        self.charged = True

    @property
    def spent(self) -> bool:
        return self.charged and (self.left <= 0 or time.monotonic() >= self.deadline)

    @property
    def reason(self) -> Literal["bytes", "time"]:
        """Once spent, which limit ran out: ``"bytes"`` or ``"time"``."""
        return "bytes" if self.left <= 0 else "time"


@dataclass(frozen=True)
class Paused:
    """A line left part-way because the budget ran out: resume it at this byte offset."""

    offset: int


@dataclass(frozen=True)
class Regex:
    """A compiled caller regex: the RE2 text it became, and literals every match contains."""

    source: str
    translated: str
    literals: list[str]  # longest first, each of three characters or more
    compiled: Any  # re2._re2.RE2
    block: Any  # the same in (?m) over several whole lines at once, or None (see first_in_block)

    def first_in_block(self, data: bytes) -> int:
        """Given whole lines joined by ``\\n`` (at most :data:`WINDOW` bytes), return the byte offset
        where the leftmost match starts, or -1: no line of the block matches. -2 when unknown.

        A line's match is the same bytes in the block, and in ``(?m)`` the block's ``^ $ \\b \\B``
        agree with the line's at its edges (a newline is neither a word character nor text), so a
        block without a match holds no matching line, and no line before the one holding the
        block's leftmost match start matches. A block match may cross lines: the caller checks
        that line on its own. Patterns with ``\\A``, ``\\z`` or a ``-m`` flag give -2.
        """
        return self.block_at(data, 0, len(data))

    def block_at(self, data: bytes, start: int, end: int) -> int:
        """As :meth:`first_in_block`, over the whole lines ``data[start:end]`` (``start`` at a line's
        start, ``end`` at one's end) of a larger buffer, whose other bytes are read as context only."""
        if self.block is None:
            return -2
        return int(self.block.Match(_UNANCHORED, data, start, end)[0][0])

    def find(self, line: str) -> int:
        """The 0-based column of the first match in ``line``, or -1 (the whole line, with no budget)."""
        found = self.first_match(line)
        assert isinstance(found, int)
        return found

    def spans(self, line: str, most: int = 100) -> list[tuple[int, int]]:
        """The (start, end) columns of up to ``most`` non-overlapping matches in ``line``, left to right
        (what a page highlights); an empty match is skipped."""
        data = line.encode("utf-8", "surrogatepass")
        found: list[tuple[int, int]] = []
        pos = 0
        while pos <= len(data) and len(found) < most:
            start, end = self.compiled.Match(_UNANCHORED, data, pos, len(data))[0]
            if start < 0:
                break
            if end > start:
                found.append((start, end))
            pos = end + 1 if end == start else end
            while 0 < pos < len(data) and data[pos] & 0xC0 == 0x80:  # past the rest of a character
                pos += 1
        if line.isascii():
            return found
        return [(len(data[:a].decode("utf-8", "surrogatepass")), len(data[:b].decode("utf-8", "surrogatepass")))
                for a, b in found]  # fmt: skip

    def first_match(self, line: str, start: int = 0, budget: Budget | None = None) -> int | Paused:
        """Given a line, return the 0-based column of its first match, or -1.

        ``start`` is a byte offset to resume from (a :class:`Paused` offset). The ``budget`` is
        charged per window; when it is spent and windows remain, :class:`Paused` is returned.
        """
        data = line.encode("utf-8", "surrogatepass")
        at = self.first_in(data, start, len(data), budget)
        if isinstance(at, Paused) or at < 0 or line.isascii():
            return at
        return len(data[:at].decode("utf-8", "surrogatepass"))

    def first_in(self, data: bytes, start: int, end: int, budget: Budget | None = None) -> int | Paused:
        """Given the bytes of one line, return the byte offset of the leftmost match lying within
        ``data[start:end]``, or -1.

        Bytes of ``data`` outside ``start:end`` are context only (``^``, ``$`` and ``\\b`` read them), so
        a piece of a longer line can be searched with a few of its neighbours. The piece is matched in
        windows of :data:`WINDOW` bytes overlapping by :data:`OVERLAP`; the ``budget`` is charged per
        window, and :class:`Paused` (where to resume) is returned when it is spent and windows remain.
        Invalid UTF-8 matches no character (as GNU grep's encoding errors: not even ``.``).
        """
        size = min(end, len(data))
        pos = _boundary(data, min(max(start, 0), size))
        while True:
            stop = size if size - pos <= WINDOW else _boundary(data, pos + WINDOW)
            at = self.compiled.Match(_UNANCHORED, data, pos, stop)[0][0]
            if budget is not None:
                budget.charge(max(stop - pos, 1))
            if at >= 0:
                return int(at)
            if stop >= size:
                return -1
            pos = _boundary(data, stop - OVERLAP)
            if budget is not None and budget.spent:
                return Paused(pos)


def compile_regex(pattern: str, flags: str = "", *, subject: str = "the search query is invalid") -> Regex:
    """Given an ECMAScript-style pattern and flags from ``i m s u``, return it compiled for RE2.

    Args:
        subject: what the refusal messages start with (the SSH shell's grep names itself).

    Raises:
        TooLarge: the pattern is over :data:`MAX_PATTERN_CHARS` characters.
        InvalidPath: it holds a lone surrogate.
        InvalidPath: an unknown flag, syntax RE2 does not offer, groups nested over
            :data:`MAX_NESTING` deep, a program over :data:`MAX_PROGRAM_SIZE` instructions, or a
            pattern that does not compile (the draft's code for a bad query).
    """
    check_query(pattern, "regex")
    prefix = ""
    for flag in flags:
        if flag not in _FLAGS:
            raise InvalidPath(f"{subject}: unknown regex flag {flag!r} (allowed: i, m, s, u)")
        prefix += _FLAGS[flag] if _FLAGS[flag] not in prefix else ""
    translated, literals = scan(pattern, subject)
    text = f"(?{prefix}){translated}" if prefix else translated
    compiled = _re2_object(text)
    if not compiled.ok():
        reason = compiled.error().decode("utf-8", "replace")
        if "too large" in reason:
            raise InvalidPath(f"{subject}: the regex is too complex ({ENGINE}): {_SIMPLER}")
        raise InvalidPath(f"{subject}: the regex does not compile ({reason}; {ENGINE})")
    size = compiled.ProgramSize()
    if size > MAX_PROGRAM_SIZE:
        raise InvalidPath(
            f"{subject}: the regex is too complex: it compiles to {size:,} steps and the limit is "
            f"{MAX_PROGRAM_SIZE:,} ({ENGINE}): {_SIMPLER}"
        )
    block = None
    if not _UNBLOCKABLE.search(text):
        block = _re2_object("(?m)" + text)
        block = block if block.ok() else None
    return Regex(pattern, text, literals, compiled, block)


def check_query(text: str, what: str = "search query") -> None:
    """Refuse a query or regex that is over :data:`MAX_PATTERN_CHARS` characters or not valid Unicode.

    Raises:
        TooLarge: too long (the message states the limit).
        InvalidPath: it holds a lone surrogate, which JSON can spell but UTF-8 cannot carry.
    """
    if len(text) > MAX_PATTERN_CHARS:
        raise TooLarge(f"the {what} is too long: {len(text):,} characters; the limit is {MAX_PATTERN_CHARS:,}")
    if not _encodable(text):
        raise InvalidPath(f"the {what} holds a lone surrogate (not a Unicode character)")


# -- helpers --------------------------------------------------------------------------------------


def _re2_object(text: str) -> Any:
    """RE2 over ``text`` with this module's options; check ``ok()`` before use."""
    options = re2.Options()
    options.max_mem = MAX_MEM
    options.log_errors = False
    return re2._re2.RE2(text.encode("utf-8"), options)


def _boundary(data: bytes, at: int) -> int:
    """The nearest UTF-8 character start at or before ``at`` (so a window never splits a character)."""
    while 0 < at < len(data) and data[at] & 0xC0 == 0x80:
        at -= 1
    return at


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
