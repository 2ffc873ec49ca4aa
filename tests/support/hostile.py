"""Hostile inputs for the door fuzz tests (issue 11: every input error is a 4xx, never a 500).

Everything here is deterministic: hand lists of known-bad values, and generators driven by a
``random.Random`` the test seeds, so a failing case can be named and replayed. Nothing here knows
a door: the tests turn these values into tool arguments, shell lines, SFTP requests or os calls.

- :data:`HAND_PATHS`, :func:`hostile_path`: traversal, NUL and control characters, bidi and
  non-characters, overlong names and paths, reserved and read-only areas, relative and empty paths.
- :func:`hostile_text`: strings of any length from the same pieces (``huge`` for 100k+ characters).
- :data:`LONE_SURROGATES`: strings JSON can spell (``"\\ud800"``) but UTF-8 cannot carry.
- :data:`BAD_UTF8`, :func:`hostile_name_bytes`: raw bytes that are not UTF-8 (overlong encodings,
  encoded surrogates, truncated sequences), for doors that carry bytes (SSH, FUSE).
- :data:`HOSTILE_INTS`, :data:`WRONG_TYPES`, :data:`BOGUS_CURSORS`: offsets, limits and cursors.
- :data:`BAD_REGEXES` (refused or odd, but quick) and :data:`REGEX_BOMBS` with :data:`BOMB_BAIT`
  (catastrophic backtracking for a backtracking engine on the bait lines).
- :func:`malformed_json`: bodies that are not JSON, not objects, or JSON nested past any parser's stack.
"""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AREAS",
    "BAD_REGEXES",
    "BAD_UTF8",
    "BOGUS_CURSORS",
    "BOMB_BAIT",
    "CONTROL",
    "HAND_PATHS",
    "HOSTILE_INTS",
    "LONE_SURROGATES",
    "REGEX_BOMBS",
    "WRONG_TYPES",
    "Tally",
    "hostile_name_bytes",
    "hostile_path",
    "hostile_text",
    "malformed_json",
    "short",
]

AREAS = ["/", "/facts", "/procedures", "/files", "/working", "/episodes", "/sessions", "/history", "/.afi", "/nope"]

CONTROL = [
    "\x00",
    "\x01",
    "\x07",
    "\x08",
    "\t",
    "\n",
    "\r",
    "\x1b[31m",
    "\x7f",
    "\x85",
    "\u2028",
    "\u202e",
    "\ufeff",
    "\uffff",
]

LONE_SURROGATES = ["\ud800", "\udfff", "\udcff", "a\ud83d", "\ude00b", "\udc80\udc80"]

# Not UTF-8: overlong '/' and '.', encoded surrogates, a 5-byte form, stray continuation and lead bytes.
BAD_UTF8 = [
    b"\xff",
    b"\xfe\xff",
    b"\xc0\xaf",
    b"\xe0\x80\xaf",
    b"\xc0\xae\xc0\xae",
    b"\xed\xa0\x80",
    b"\xf8\x88\x80\x80\x80",
]
BAD_UTF8 += [b"\x80", b"\xc3", b"\xe2\x82", b"\xf4\x90\x80\x80"]

HOSTILE_INTS = [
    -1,
    -(2**31),
    -(2**63),
    -(2**64),
    0,
    1,
    2**31 - 1,
    2**31,
    2**32,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64,
    10**30,
]

WRONG_TYPES: list[Any] = [None, True, False, 0, -1, 1.5, -0.0, 1e308, "", "x", [], ["/"], {}, {"path": "/"}]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii")


BOGUS_CURSORS = ["", "x", "null", "!!!", "====", "a" * 10_000, "\t", "../../etc/passwd", "%00", "-1"]
BOGUS_CURSORS += [_b64(raw) for raw in (b"{}", b"[]", b"null", b"1", b'"a"', b"\xff\xfe", b'{"a": null}', b'{"a": []}')]
BOGUS_CURSORS += [_b64(json.dumps(body).encode()) for body in ({"a": "/x", "v": -1}, {"a": {"b": 1}}, {"o": 2**70})]
BOGUS_CURSORS += [_b64(b"[" * 5000), _b64(b"x" * 100_000)]
# Forged in the right shape, with the wrong insides: each verb's kind with missing or mistyped positions.
_FORGED: list[dict[str, Any]] = [{"k": kind} for kind in ("list", "grep", "semantic", "x-conversation", "search")]
_FORGED += [{"k": "list", "a": value} for value in (None, 1, {}, [], "\x00", "../..")]
_FORGED += [{"k": "grep", "p": p, "l": line} for p, line in (("/", "x"), (1, 1), (None, None), ("/files", -5))]
_FORGED += [{"k": "grep", "p": "/", "l": 10**400}, {"k": "grep", "p": [], "l": {}}, {"k": "grep", "p": "/", "l": 1e308}]
_FORGED += [{"k": "semantic", "o": value} for value in (-5, "x", 1e300, 10**30, None, [])]
BOGUS_CURSORS += [_b64(json.dumps(body).encode()) for body in _FORGED]

BAD_REGEXES = [
    "a{4294967296}",
    "(",
    ")",
    "[",
    "\\",
    "a{2,1}",
    "[z-a]",
    "*",
    "+a",
    "a**",
    "(?",
    "(?<",
    "\\k<x>",
    "(?P<n>a)(?P=m)",
]
BAD_REGEXES += ["\\1", "\\p{L}", "\\u{1F600}", "(?<=a+)b", "\\c", "x{99999999}", "(?i)x", "[[:alpha:]]", "\\Q.\\E"]
BAD_REGEXES += ["^$", "(?#c)", "\\g<1>", "(?x) a # c", "a{,5}", "\\", "(" * 200 + ")" * 200, "(" * 2000 + ")" * 2000]
BAD_REGEXES += ["|".join(f"w{i}" for i in range(3000)), "[" + "a-" * 500 + "]", "\\x{41}", "\x00", "a\x00b"]

# Each is exponential (or high-polynomial) for a backtracking engine on a BOMB_BAIT line.
REGEX_BOMBS = ["(a+)+$", "(a*)*$", "(a|a)*$", "(a|aa)+$", "^(a+)+b", "((a+)+)+$", "(a|a?)+$", "(?:a+){20}$"]
REGEX_BOMBS += ["(\\w+\\s?)+$", "(.*a){25}"]
BOMB_BAIT = "a" * 34 + "!"

_NAME_PIECES = [
    "a",
    "note",
    ".",
    "..",
    "...",
    ".afi",
    "manifest.json",
    "search",
    ".md",
    ".txt",
    " ",
    "~",
    "*",
    "?",
    "[",
    "%2e%2e",
    "%00",
    "\\",
    "..\\..",
    "$(id)",
    "`id`",
    ";rm -rf /",
    "|",
    ">",
    "'",
    '"',
    "é",
    "e\u0301",
    "𝔘",
    "😀",
    "日本",
    "\u200b",
]


def hostile_text(rng: random.Random, *, huge: bool = False) -> str:
    """Given a generator, return a hostile string: pieces, control characters, any code point, any length."""
    roll = rng.random()
    if huge or roll < 0.03:
        return rng.choice(["a", "é", "😀", "\x01", "/", "*"]) * rng.choice([70_000, 200_000, 1_100_000])
    parts: list[str] = []
    for _ in range(rng.randrange(1, 8)):
        pick = rng.random()
        if pick < 0.4:
            parts.append(rng.choice(_NAME_PIECES))
        elif pick < 0.6:
            parts.append(rng.choice(CONTROL))
        elif pick < 0.8:
            parts.append(
                "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0xA0, 0xD800)])) for _ in range(4))
            )
        else:
            parts.append(chr(rng.randrange(0xE000, 0x110000)) * rng.randrange(1, 3))
    return "".join(parts)


HAND_PATHS = [
    "",
    ".",
    "..",
    "x",
    "facts/x.md",
    "/",
    "//",
    "/..",
    "/../etc/passwd",
    "/files/../../etc/passwd",
    "/files/a/../../..",
    "/files/" + "../" * 60 + "etc/passwd",
    "/files/..%2f..%2fetc",
    "/files/%2e%2e/%2e%2e/etc",
    "/files/....//....//etc",
    "/files/\\..\\..\\etc",
    "/files/./././.",
    "/spaces/other/facts/x.md",
    "/\x00",
    "/files/a\x00b",
    "/facts/\x00.md",
    "/files/\n",
    "/files/\r\n.md",
    "/facts/\x1b[31m.md",
    "/files/\u202etxt.exe",
    "/files/\ufeff",
    "/files/\uffff",
    "/files/ ",
    "/files/" + "a" * 255,
    "/files/" + "a" * 256,
    "/files/" + "é" * 128,
    "/" + "a/" * 511,
    "/" + "a/" * 600,
    "/files/" + "x" * 5000,
    "/facts/.md",
    "/facts/..md",
    "/facts/x.txt",
    "/facts/a/b.md",
    "/working/.md",
    "/working/core.md/x",
    "/history/000000000000.md",
    "/history/zz.md",
    "/sessions/../facts",
    "/episodes/x.md",
    "/.afi/manifest.json",
    "/.afi/manifest.json/x",
    "/.afi/search",
    "/.afi/../.afi/x",
    "/files/bait.txt/child",
    "/files/*",
    "/files/[",
    "/files/$(id)",
    "/files/`id`",
    "/files/~root",
    "C:\\Windows\\system32",
    "\\\\server\\share",
    "file:///etc/passwd",
    "afi://facts/x.md",
    "/proc/self/environ",
]


def hostile_path(rng: random.Random) -> str:
    """Given a generator, return a hostile path: a hand-listed one, or an area and hostile segments."""
    if rng.random() < 0.35:
        return rng.choice(HAND_PATHS)
    base = rng.choice(AREAS)
    segments = [
        rng.choice(_NAME_PIECES) if rng.random() < 0.6 else hostile_text(rng) for _ in range(rng.randrange(1, 4))
    ]
    if rng.random() < 0.1:
        segments.append("x" * rng.choice([255, 256, 1000]))
    path = base.rstrip("/") + "/" + "/".join(segments)
    if rng.random() < 0.15:
        path = path.lstrip("/")
    if rng.random() < 0.1:
        path += rng.choice(["/", "//", "/.", "/.."])
    return path


def hostile_name_bytes(rng: random.Random) -> bytes:
    """Given a generator, return one path segment as raw bytes: hostile text, often with bytes that are not UTF-8."""
    text = rng.choice(_NAME_PIECES + CONTROL) if rng.random() < 0.5 else hostile_text(rng)
    raw = text.encode("utf-8", "surrogatepass")[:200].replace(b"/", b"_").replace(b"\x00", b"_")
    if rng.random() < 0.6:
        cut = rng.randrange(len(raw) + 1)
        raw = raw[:cut] + rng.choice(BAD_UTF8) + raw[cut:]
    return raw or b"_"


def malformed_json(rng: random.Random | None = None) -> list[bytes]:
    """Return request bodies that are not a JSON object: broken, wrong type, not UTF-8, or nested too deep."""
    bodies = [b"", b" ", b"{", b"}", b"[", b"[]", b"{}", b"null", b"true", b"1", b'"x"', b"-", b"1e999999", b"NaN"]
    bodies += [b'{"a": NaN}', b'{"a": Infinity}', b"{'a': 1}", b'{"a" 1}', b'{"a": 1,}', b"[1,]", b'{"a": "\\x41"}']
    bodies += [
        b'{"a": "\\ud800"}',
        b'{"\xff": 1}',
        b'{"a": "\xc0\xaf"}',
        b"\xef\xbb\xbf{}",
        b"\xff\xfe{\x00}\x00",
        b"\x00",
    ]
    bodies += [b"[" * 100_000, b'{"a":' * 50_000, b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 3000 + b"1" + b"}" * 3000]
    bodies += [b"1" * 100_000, b'"' + b"a" * 2_000_000 + b'"', b'{"a": 1, "a": 2}', b"{}" * 1000]
    if rng is not None:
        for _ in range(20):
            junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
            bodies.append(junk)
    return bodies


@dataclass
class Tally:
    """Cases tried and the failures among them, each named so it can be replayed."""

    door: str
    tried: int = 0
    failures: list[str] = field(default_factory=list)

    def fail(self, case: Any, why: str) -> None:
        self.failures.append(f"{why}: {short(case)}")

    def report(self) -> str:
        shown = "\n".join(self.failures[:40])
        return f"{self.door}: {self.tried} hostile cases, {len(self.failures)} failures\n{shown}"


def short(value: Any) -> str:
    """Given a case, return its repr, cut to 300 characters (with its full length)."""
    text = repr(value)
    return text if len(text) <= 300 else text[:300] + f"… ({len(text)} chars)"
