"""What ``grep`` prints of a matching line: the whole line (a search answer cuts long ones), and
whether its file is binary, in which case GNU grep says ``binary file matches`` instead.

Both read the file through the ``read`` verb, forward and a piece at a time, never the whole file.
"""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .shell import Shell

__all__ = ["BINARY_PEEK", "LineReader", "is_binary", "looks_binary", "printable"]

BINARY_PEEK = 32 << 10  # GNU grep judges a file by its first buffer: 32 KiB
_PIECE = 1 << 20


class LineReader:
    """Whole lines of one file at a time, read forward (matches come in line order): at most ``cap``
    bytes of a line are kept (one more says it is longer), plus one piece being read."""

    def __init__(self, shell: Shell, cap: int) -> None:
        self.shell = shell
        self.cap = cap
        self.path = ""
        self.buffer = b""
        self.pos = 0  # where the next line starts in buffer
        self.done = 0  # lines passed before it
        self.offset = 0  # the file's bytes read so far
        self.eof = False

    def line(self, path: str, number: int) -> bytes:
        """Given a file and a 1-based line number, return that line's bytes (no newline)."""
        if path != self.path or number <= self.done:
            self.path, self.buffer, self.pos, self.done, self.offset, self.eof = path, b"", 0, 0, 0, False
        while self.done < number - 1:
            newline = self.buffer.find(b"\n", self.pos)
            if newline >= 0:
                self.pos, self.done = newline + 1, self.done + 1
            elif self.eof:
                return b""
            else:
                self.buffer, self.pos = b"", 0  # within a long line: its bytes are not kept
                self._more()
        while True:
            newline = self.buffer.find(b"\n", self.pos)
            if newline >= 0:
                return self.buffer[self.pos : newline]
            if self.eof or len(self.buffer) - self.pos > self.cap:
                return self.buffer[self.pos : self.pos + self.cap + 1]
            self._more()

    def _more(self) -> None:
        result = self.shell.client.read(self.path, offset=self.offset, length=_PIECE)
        self.buffer = self.buffer[self.pos :] + result.data
        self.pos = 0
        self.offset += len(result.data)
        self.eof = result.eof or not result.data


def is_binary(shell: Shell, path: str, peeked: dict[str, bool]) -> bool:
    """Whether GNU grep would call ``path`` binary from its first 32 KiB (``peeked`` keeps the answer
    per file). A matching line is judged by :func:`printable`."""
    if path not in peeked:
        head = shell.client.read(path, length=BINARY_PEEK)
        peeked[path] = looks_binary(head.data, final=head.eof)
    return peeked[path]


def looks_binary(head: bytes, *, final: bool) -> bool:
    """GNU grep's test of the first bytes it reads: a NUL, or bytes that are not UTF-8 (a character
    cut at the end of ``head`` is fine unless ``final``)."""
    return b"\x00" in head or not _utf8(head, final=final)


def printable(line: bytes) -> bool:
    """Whether GNU grep prints a matching line as it is: no NUL, and UTF-8."""
    return b"\x00" not in line and _utf8(line, final=True)


def _utf8(data: bytes, *, final: bool) -> bool:
    """Whether ``data`` is UTF-8 (a character cut at its end is fine unless ``final``)."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=final)
    except UnicodeDecodeError:
        return False
    return True
