"""``grep`` over the tree, served from the provider's search index, printed as GNU grep prints it.

Patterns are GNU's: basic regular expressions by default (``-G``), extended with ``-E``, fixed
strings with ``-F``. A pattern without regex syntax (and without ``-i``/``-w``) is sent as an
``exact`` query; anything else becomes a ``regex`` query, so every file search is an index lookup.
Input from a pipe is filtered here, line by line, with the provider's matcher (:mod:`afi.regex`:
RE2, linear time). Output is ``path:line:text`` as GNU grep's, every page of the search followed, so
nothing a page's work budget left for the next is missed. A binary file (a NUL, or bytes that are
not UTF-8) that matches is told on stderr as GNU grep 3.8 does, ``grep: FILE: binary file matches``;
``-c``, ``-l`` and ``-q`` treat it as any file.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from afi.errors import AfiError, InvalidPath
from afi.model import Match
from afi.regex import compile_regex

from .base import Io, iter_lines
from .cmds import split_flags
from .grep_lines import BINARY_PEEK, LineReader, is_binary, looks_binary, printable

if TYPE_CHECKING:
    from .shell import Shell

__all__ = ["bre_to_python", "grep_query"]

_BRE_SPECIAL = set(".[]*^$\\")
_CLASSES = {
    "[:alpha:]": "a-zA-Z",
    "[:digit:]": "0-9",
    "[:alnum:]": "a-zA-Z0-9",
    "[:upper:]": "A-Z",
    "[:lower:]": "a-z",
    "[:space:]": r"\s",
    "[:blank:]": r" \t",
    "[:xdigit:]": "0-9A-Fa-f",
    "[:punct:]": r"!-/:-@\[-`{-~",
    "[:word:]": r"\w",
}
_WORD = "0-9A-Za-z_"


def _posix_classes(pattern: str) -> str:
    for name, body in _CLASSES.items():
        pattern = pattern.replace(name, body)
    return pattern


def bre_to_python(pattern: str) -> str:
    """Given a POSIX basic regular expression, return the same pattern in Python/ECMAScript syntax."""
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        ch = pattern[i]
        if in_class:
            out.append(ch)
            if ch == "]" and not (out[-2:-1] == ["["] or out[-3:-1] == ["[", "^"]):
                in_class = False
            i += 1
            continue
        if ch == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            out.append(nxt if nxt in "(){}|+?" else "\\" + nxt)
            i += 2
            continue
        if ch == "[":
            in_class = True
            out.append(ch)
        elif ch in "(){}|+?":
            out.append("\\" + ch)
        elif ch == "*" and (not out or out[-1] in ("^", "(")):
            out.append(r"\*")
        else:
            out.append(ch)
        i += 1
    return _posix_classes("".join(out))


@dataclass(frozen=True)
class _Options:
    names: bool | None  # None: GNU's default (several operands, or a folder searched with -r)
    number: bool
    files_only: bool
    count: bool
    quiet: bool


def grep_query(pattern: str, *, extended: bool, fixed: bool, ignore_case: bool, word: bool) -> str | dict[str, Any]:
    """Given a grep pattern and its options, return the AFI search query that finds the same lines."""
    plain = fixed or (not extended and not (set(pattern) & _BRE_SPECIAL))
    if plain and not ignore_case and not word:
        return pattern
    if plain:
        body = re.escape(pattern)
    elif extended:
        body = _posix_classes(pattern)
    else:
        body = bre_to_python(pattern)
    if word:  # GNU's -w, without lookaround: a non-word character (or the line's edge) on each side
        body = f"(?:^|[^{_WORD}])(?:{body})(?:[^{_WORD}]|$)"
    return {"regex": body, "flags": "i" if ignore_case else ""}


def _line_test(query: str | dict[str, Any]) -> Callable[[str], bool]:
    """What the query finds, as a test of one line of piped input."""
    if isinstance(query, str):
        return lambda line: query in line
    regex = compile_regex(query["regex"], query["flags"], subject="grep: the pattern is invalid")
    return lambda line: regex.find(line) >= 0


def grep(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    flags, operands = split_flags(args, takes_value="e")
    for letter in flags:
        if letter not in "rREFGinlcwHhqe":
            raise InvalidPath(f"grep: unknown option -{letter}; this grep offers -r -E -F -i -n -l -c -w -H -h -q -e")
    if "e" in flags:
        pattern = flags["e"]
    elif operands:
        pattern, operands = operands[0], operands[1:]
    else:
        raise InvalidPath("grep: give a pattern, e.g. grep -rn canary /")
    if pattern == "":
        raise InvalidPath("grep: the pattern is empty")
    query = grep_query(pattern, extended="E" in flags, fixed="F" in flags, ignore_case="i" in flags, word="w" in flags)
    recursive = "r" in flags or "R" in flags
    many = len(operands) > 1
    opts = _Options(
        names=True if "H" in flags else False if "h" in flags else None,
        number="n" in flags,
        files_only="l" in flags,
        count="c" in flags,
        quiet="q" in flags,
    )
    found = False
    if not operands:
        found = yield from _grep_stream(io, _line_test(query), opts)
    for operand in operands:
        try:
            hit = yield from _grep_operand(shell, operand, query, recursive, many, opts, io)
        except AfiError as err:
            io.fail(err)
            continue
        found = found or hit
    if io.status < 2:
        io.status = 0 if found else 1


def _grep_stream(io: Io, test: Callable[[str], bool], opts: _Options) -> Generator[bytes, None, bool]:
    lines = iter_lines(io.stdin)
    head: list[bytes] = []
    size = 0
    for raw in lines:  # GNU grep judges its input by the first buffer it reads
        head.append(raw)
        size += len(raw)
        if size >= BINARY_PEEK:
            break
    binary, told, count = looks_binary(b"".join(head), final=False), False, 0
    for number, raw in enumerate(itertools.chain(head, lines), start=1):
        line = raw.decode("utf-8", "surrogateescape").rstrip("\n")
        if not test(line):
            continue
        count += 1
        if opts.quiet or opts.files_only or opts.count or told:
            continue
        if binary or not printable(raw.rstrip(b"\n")):
            told = True
            io.errors.append("grep: (standard input): binary file matches\n")
            continue
        yield (f"{number}:" if opts.number else "").encode() + line.encode("utf-8", "surrogateescape") + b"\n"
    if opts.files_only and count and not opts.quiet:
        yield b"(standard input)\n"
    if opts.count and not opts.quiet:
        yield f"{count}\n".encode()
    return count > 0


def _grep_operand(
    shell: Shell, operand: str, query: str | dict[str, Any], recursive: bool, many: bool, opts: _Options, io: Io
) -> Generator[bytes, None, bool]:
    scope = shell.path(operand)
    entry = shell.client.stat(scope)
    if entry.type == "directory" and not recursive:
        raise InvalidPath("is a folder (use grep -r to search below it)", path=operand)
    names = opts.names if opts.names is not None else many or (recursive and entry.type == "directory")

    def shown(path: str) -> str:
        if path == scope:
            return operand
        rest = path[len(scope) :] if scope != "/" else path
        return operand.rstrip("/") + rest if operand.rstrip("/") else rest

    counts: dict[str, int] = {}
    lines = LineReader(shell, max(shell.output_cap, shell.write_cap))
    peeked: dict[str, bool] = {}
    binary: set[str] = set()
    for match in _matches(shell, query, scope):
        counts[match.path] = counts.get(match.path, 0) + 1
        if opts.quiet:
            return True
        if opts.files_only:
            if counts[match.path] == 1:
                yield (shown(match.path) + "\n").encode()
            continue
        if opts.count or match.path in binary:
            continue
        line = _whole_line(match, lines)
        if is_binary(shell, match.path, peeked) or (not printable(line) and len(line) <= lines.cap):
            binary.add(match.path)
            io.errors.append(f"grep: {shown(match.path)}: binary file matches\n")
            continue
        prefix = (f"{shown(match.path)}:" if names else "") + (f"{match.line}:" if opts.number else "")
        yield prefix.encode() + line + b"\n"
    if opts.count:
        paths = [scope] if entry.type != "directory" else _files_below(shell, scope, io)
        for path in paths:
            yield ((f"{shown(path)}:" if names else "") + f"{counts.get(path, 0)}\n").encode()
    return bool(counts)


def _matches(shell: Shell, query: str | dict[str, Any], scope: str) -> Iterator[Match]:
    cursor: str | None = None
    while True:
        page = shell.client.search(query, path=scope, limit=1000, cursor=cursor)
        yield from page.matches
        if not page.next_cursor:
            return
        cursor = page.next_cursor


def _whole_line(match: Match, lines: LineReader) -> bytes:
    """The matching line's bytes: the search answer cuts long lines with '…' and shows bytes that are
    not UTF-8 as U+FFFD, so such a line is read back; grep prints it whole."""
    text = match.text
    if "\ufffd" not in text and (len(text) < 255 or not (text.startswith("…") or text.endswith("…"))):
        return text.encode("utf-8")
    return lines.line(match.path, match.line)


def _files_below(shell: Shell, top: str, io: Io) -> list[str]:
    out: list[str] = []
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            children = shell.list_all(folder)
        except AfiError as err:
            io.fail(err)
            continue
        for child in children:
            if child.type == "directory":
                stack.append(child.path)
            elif child.type == "file":
                out.append(child.path)
    return sorted(out)
