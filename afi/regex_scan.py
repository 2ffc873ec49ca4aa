"""The one linear pass over a caller's regex (see :mod:`afi.regex`): RE2 text, refusals, literals.

It walks the pattern once, without recursion: translates ECMAScript forms (``(?<name>…)``,
``\\uXXXX``, ``\\u{…}``, Python's ``\\Z``) to RE2's, refuses what RE2 cannot do in words, counts
how deep groups nest and how many Unicode classes there are, and collects the literal runs of the
top-level sequence (a literal character, or a group holding only literal characters, not repeated;
any top-level alternation means none). It reads RE2's syntax (``[[:alpha:]]``, ``\\Q…\\E``,
``{,n}`` as text), so a literal it reports is one every match contains.
"""

from __future__ import annotations

import re

from afi.errors import InvalidPath

__all__ = ["ENGINE", "MAX_NESTING", "MAX_UNICODE_CLASSES", "scan"]

MAX_NESTING = 100  # group levels
MAX_UNICODE_CLASSES = 64  # \p{…} classes: each is ~1,200 instructions and costs RE2's parser (GIL held) time
ENGINE = "search uses a linear-time regex engine (RE2)"

_REPEAT = re.compile(r"\{([0-9]+)(,[0-9]*)?\}")
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")
_BRACED_HEX = re.compile(r"\{([0-9A-Fa-f]{1,6})\}")
_LITERAL_ESCAPES = frozenset(" !\"#%&',-/:;<=>@_`~") | frozenset(".^$*+?()[]{}|\\")
_LONG_ESCAPE = re.compile(r"\\(?:[pP](?:\{[^}]{0,64}\}|.)|x(?:\{[^}]{0,16}\}|[0-9A-Fa-f]{0,2})|0[0-7]{0,2})", re.DOTALL)
_CLASS_ESCAPE_END = re.compile(r"\\[pP]\{[^}]{0,64}\}|\\[pP].|\\x\{[^}]{0,16}\}|\\.", re.DOTALL)
_POSIX_CLASS = re.compile(r"\[:\^?[a-z]+:\]")
_NAMED_GROUP = re.compile(r"\(\?P?<([^>()]{0,256})>")
_FLAG_GROUP = re.compile(r"\(\?([a-zA-Z-]*)([:)])")


def _unsupported(subject: str, what: str) -> InvalidPath:
    return InvalidPath(f"{subject}: {what} are not supported: {ENGINE}")


class _Scan:
    """One linear pass: the RE2 text, the top-level atoms (a literal or None) and the deepest nesting."""

    def __init__(self, pattern: str, subject: str) -> None:
        self.p = pattern
        self.subject = subject
        self.out: list[str] = []
        self.atoms: list[str | None] = []  # top level: a literal (a character or a pure group) or None
        self.groups: list[list[str] | None] = []  # open groups: their literal text while pure, else None
        self.alternation = False
        self.deepest = 0
        self.unicode_classes = 0

    def atom(self, literal: str | None) -> None:
        if not self.groups:
            self.atoms.append(literal)
        elif literal is None:
            self.groups[-1] = None
        elif self.groups[-1] is not None:
            self.groups[-1].append(literal)

    def impure(self) -> None:
        """What follows (a repeat, an alternation) stops the innermost open group being a plain literal."""
        if self.groups:
            self.groups[-1] = None
        elif self.atoms:
            self.atoms[-1] = None


def scan(pattern: str, subject: str) -> tuple[str, list[str]]:
    """Given a caller's pattern, return its RE2 text and the literals every match contains.

    Raises:
        InvalidPath: syntax RE2 lacks, groups nested over :data:`MAX_NESTING` deep or over
            :data:`MAX_UNICODE_CLASSES` Unicode classes; the message starts with ``subject``.
    """
    scan = _Scan(pattern, subject)
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i = _escape(scan, i)
        elif ch == "[":
            i = _char_class(scan, i)
        elif ch == "(":
            i = _open_group(scan, i)
        elif ch == ")":
            scan.out.append(ch)
            if scan.groups:
                content = scan.groups.pop()
                scan.atom(None if content is None else "".join(content))
            else:
                scan.atom(None)  # unbalanced: RE2 reports it
            i += 1
        elif ch in "*+?" or (ch == "{" and _REPEAT.match(pattern, i)):
            i = _repeat(scan, i)
        elif ch == "|":
            scan.out.append(ch)
            if scan.groups:
                scan.groups[-1] = None
            else:
                scan.alternation = True
            i += 1
        else:
            scan.out.append(ch)
            scan.atom(None if ch in ".^$" else ch)
            i += 1
    if scan.deepest > MAX_NESTING:
        raise InvalidPath(f"{subject}: its groups nest {scan.deepest:,} deep; the limit is {MAX_NESTING}")
    if scan.unicode_classes > MAX_UNICODE_CLASSES:
        raise InvalidPath(
            f"{subject}: it has {scan.unicode_classes:,} Unicode classes (\\p…); the limit is {MAX_UNICODE_CLASSES}"
        )
    return "".join(scan.out), _literals(scan)


def _literals(scan: _Scan) -> list[str]:
    if scan.alternation:
        return []
    runs: list[str] = []
    current: list[str] = []
    for atom in [*scan.atoms, None]:
        if atom is None:
            if current:
                runs.append("".join(current))
            current = []
        else:
            current.append(atom)
    return sorted((run for run in runs if len(run) >= 3), key=len, reverse=True)


def _escape(scan: _Scan, i: int) -> int:
    """Translate the escape at ``i``; return where the next token starts."""
    p = scan.p
    if i + 1 >= len(p):
        scan.out.append("\\")  # a trailing backslash: RE2 reports it
        return i + 1
    nxt = p[i + 1]
    if nxt in "123456789":
        raise _unsupported(scan.subject, f"backreferences (\\{nxt})")
    if nxt in "kg":
        raise _unsupported(scan.subject, f"backreferences and subroutine calls (\\{nxt}<…>)")
    if nxt == "C":
        raise _unsupported(scan.subject, "single bytes (\\C)")
    if nxt == "u":
        return _unicode_escape(scan, i)
    if nxt == "Q":
        end = p.find("\\E", i + 2)
        stop = len(p) if end < 0 else end + 2
        scan.out.append(p[i:stop])
        scan.atom(None)
        return stop
    if nxt in "pP":
        scan.unicode_classes += 1
    if long := _LONG_ESCAPE.match(p, i):  # \pL \p{Greek} \x41 \x{1F600} \012: one token, not literal text
        scan.out.append(long.group())
        scan.atom(None)
        return long.end()
    scan.out.append("\\z" if nxt == "Z" else p[i : i + 2])  # Python's \Z is RE2's \z
    scan.atom(nxt if nxt in _LITERAL_ESCAPES else None)
    return i + 2


def _unicode_escape(scan: _Scan, i: int) -> int:
    r"""``\uXXXX`` (a surrogate pair joined) and ``\u{X…}`` become RE2's ``\x{…}``; a literal character."""
    p = scan.p
    braced = _BRACED_HEX.match(p, i + 2)
    if braced:
        code, stop = int(braced.group(1), 16), braced.end()
    elif _HEX4.fullmatch(p, i + 2, i + 6):
        code, stop = int(p[i + 2 : i + 6], 16), i + 6
        if 0xD800 <= code < 0xDC00 and p.startswith("\\u", stop) and _HEX4.fullmatch(p, stop + 2, stop + 6):
            low = int(p[stop + 2 : stop + 6], 16)
            if 0xDC00 <= low < 0xE000:
                code, stop = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00), stop + 6
    else:
        raise InvalidPath(f"{scan.subject}: \\u takes four hex digits or {{hex}} (\\u00e9, \\u{{1F600}})")
    if code > 0x10FFFF or 0xD800 <= code < 0xE000:
        raise InvalidPath(f"{scan.subject}: \\u{code:X} is not a Unicode character")
    scan.out.append(f"\\x{{{code:X}}}")
    scan.atom(chr(code))
    return stop


def _char_class(scan: _Scan, i: int) -> int:
    """Copy the class at ``i`` (translating ``\\u`` escapes in it); a class is never a literal."""
    p, n = scan.p, len(scan.p)
    j = i + 1
    if j < n and p[j] == "^":
        j += 1
    if j < n and p[j] == "]":
        j += 1
    scan.out.append(p[i:j])
    while j < n and p[j] != "]":
        if posix := _POSIX_CLASS.match(p, j):
            scan.out.append(posix.group())
            j = posix.end()
        elif p[j] == "\\" and j + 1 < n and p[j + 1] == "u":
            sub = _Scan(p, scan.subject)
            j = _unicode_escape(sub, j)
            scan.out.extend(sub.out)
        elif p[j] == "\\":
            escape = _CLASS_ESCAPE_END.match(p, j)
            stop = escape.end() if escape else n
            if p[j + 1 : j + 2] in ("p", "P"):
                scan.unicode_classes += 1
            scan.out.append(p[j:stop])
            j = stop
        else:
            scan.out.append(p[j])
            j += 1
    if j < n:
        scan.out.append("]")
        j += 1
    scan.atom(None)
    return j


def _open_group(scan: _Scan, i: int) -> int:
    p = scan.p
    head = p[i : i + 4]
    if head.startswith(("(?=", "(?!")):
        raise _unsupported(scan.subject, "lookahead assertions ((?=…), (?!…))")
    if head.startswith(("(?<=", "(?<!")):
        raise _unsupported(scan.subject, "lookbehind assertions ((?<=…), (?<!…))")
    if head.startswith("(?P="):
        raise _unsupported(scan.subject, "backreferences ((?P=name))")
    if head.startswith("(?>"):
        raise _unsupported(scan.subject, "atomic groups ((?>…))")
    if head.startswith("(?#"):
        raise _unsupported(scan.subject, "comments ((?#…))")
    if head.startswith("(?("):
        raise _unsupported(scan.subject, "conditionals ((?(…)…))")
    if named := _NAMED_GROUP.match(p, i):
        scan.out.append(f"(?P<{named.group(1)}>")  # ECMAScript's (?<name>…) is RE2's (?P<name>…)
        stop = named.end()
    elif flags := _FLAG_GROUP.match(p, i):
        scan.out.append(flags.group())
        if flags.group(2) == ")":  # (?i) sets flags for what follows and opens nothing
            scan.atom(None)
            return flags.end()
        stop = flags.end()  # (?:…) or (?i:…)
    else:
        scan.out.append("(")  # a plain group, or a (?… form RE2 reports
        stop = i + 1
    scan.groups.append([])
    scan.deepest = max(scan.deepest, len(scan.groups))
    return stop


def _repeat(scan: _Scan, i: int) -> int:
    p = scan.p
    found = _REPEAT.match(p, i) if p[i] == "{" else None
    stop = found.end() if found else i + 1
    scan.out.append(p[i:stop])
    scan.impure()
    if stop < len(p) and p[stop] == "+":
        raise _unsupported(scan.subject, f"possessive repeats ({p[i:stop]}+)")
    if stop < len(p) and p[stop] == "?":  # lazy
        scan.out.append("?")
        stop += 1
    return stop
