"""The SSH door's hostile corpus (issue 11): shell lines, typed bytes, SFTP requests and JSON-RPC lines.

:func:`shell_cases` gives (command line, input) pairs for exec requests; :func:`interactive_lines`
lines of bytes (often not UTF-8) to type at the interactive prompt; :func:`sftp_cases` SFTP operations
with hostile paths, offsets and sizes; :func:`rpc_lines` lines for the ``afi`` subsystem. Each is a hand
list, then cases generated from a seed. ``tests/bindings/ssh/test_ssh_attacks.py`` sends them and judges the answers.
"""

from __future__ import annotations

import json
import random
from typing import Any

import asyncssh

from tests.support.hostile import (
    BAD_REGEXES,
    BAD_UTF8,
    BOGUS_CURSORS,
    BOMB_BAIT,
    HOSTILE_INTS,
    WRONG_TYPES,
    hostile_name_bytes,
    hostile_path,
    hostile_text,
    malformed_json,
)

__all__ = ["MAX_LINE", "interactive_lines", "rpc_lines", "sftp_cases", "shell_cases"]

# asyncssh drops a connection whose packet passes its limit (32 KiB and a little): a transport rule, not the shell's.
MAX_LINE = 30_000

COMMANDS = ["ls", "stat", "cat", "head", "tail", "wc", "find", "tree", "search", "pwd", "cd", "echo", "help"]
COMMANDS += ["agents", "grep", "mkdir", "rm", "rmdir", "mv", "cp", "touch", "tee", "nope", "sh", "ls\x01", "/bin/ls"]
FLAGS = ["-l", "-la", "-a", "-A", "-d", "-1", "-j", "-r", "-R", "-E", "-F", "-G", "-i", "-n", "-c", "-w", "-H", "-h"]
FLAGS += ["-q", "-l -c", "-Z", "--long", "--", "-", "-n -5", "-n +3", "-n x", "-n", "-c 99999999999999999999999"]
FLAGS += ["-L", "-L x", "-L -1", "-p", "-f", "-e", "-t", "-t nan", "-t 1e999", "-x", "-n 0", "-99999999999999999999"]
FIND = ["-name", "-name '['", "-name '*'", "-type x", "-type", "-type d", "-maxdepth -1", "-maxdepth 99999999999999999"]
FIND += ["-maxdepth", "-exec rm {} ;", "-newer /x", "-o", "!", "(", "-delete", "-print0", "-name '\\'"]
TAILS = ["> /facts/x.md", ">> /files/out.txt", "> /history/x.md", "> /.afi/manifest.json", "> ''", "< /etc/passwd"]
TAILS += ["&", "2>&1", ">", ">>", "| head -n 3", "| |", "|", "; ls", ";;", "# comment", "| grep -c a", "| wc -l", "'"]
TAILS += ['"', "\\", "> /files/a > /files/b", "| tee /files/t.txt", "> /spaces/other/files/x", "`id`", "$(id)"]


def _quote(rng: random.Random, text: str) -> str:
    """Given a word, return it as typed: bare, in single quotes, or in double quotes."""
    roll = rng.random()
    if roll < 0.4:
        return text
    if roll < 0.8:
        return "'" + text.replace("'", "'\\''") + "'"
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _word(rng: random.Random, command: str) -> str:
    roll = rng.random()
    if roll < 0.45:
        return _quote(rng, hostile_path(rng))
    if roll < 0.6:
        return rng.choice(FLAGS)
    if roll < 0.7 and command == "find":
        return rng.choice(FIND)
    if roll < 0.8 and command == "grep":
        return _quote(rng, rng.choice(BAD_REGEXES))
    if roll < 0.9:
        return _quote(rng, hostile_text(rng))
    return str(rng.choice(HOSTILE_INTS))


def shell_line(rng: random.Random) -> str:
    """Given a generator, return one hostile command line of the SSH shell."""
    command = rng.choice(COMMANDS)
    words = [command] + [_word(rng, command) for _ in range(rng.randrange(0, 5))]
    line = " ".join(words)
    if rng.random() < 0.3:
        line += " " + rng.choice(TAILS)
    if rng.random() < 0.02:
        line += " " + "a" * MAX_LINE
    return _fit(line.replace("\x00", ""))  # an exec request carries a C string


def _fit(line: str) -> str:
    return line.encode("utf-8")[:MAX_LINE].decode("utf-8", "ignore")


def hand_lines() -> list[str]:
    """Command lines picked by hand: each names one way the shell could fall over."""
    lines = [
        f"grep -E {_quote(random.Random(0), regex)} /files/bait.txt" for regex in BAD_REGEXES if "\x00" not in regex
    ]
    lines += [f"grep -rn {_quote(random.Random(1), regex)} /" for regex in BAD_REGEXES if "\x00" not in regex]
    lines += [
        "grep -e",
        "grep ''",
        "grep -w '' /",
        "grep -rc x /nope",
        "grep -c a",
        "grep -l x -",
        "grep -r a / | head -c 1",
    ]
    lines += ["head -c 99999999999999999999999 /files/bait.txt", "tail -c +99999999999999999999 /files/bait.txt"]
    lines += [
        "tail -n +0 /files/bait.txt",
        "head -n -1 /files/bait.txt",
        "tail -n 99999999999999999999 /files/bait.txt",
    ]
    lines += ["tree -L 99999999999999999999 /", "tree /files/bait.txt", "find / -maxdepth 99999999999999999999"]
    lines += ["search -n 99999999999999999999 x", "search -t -1 x", "search -t nan x", "search -t inf x", "search ''"]
    lines += ["search -p /nope x", "search -p '' x", "search -n -1 x", "ls /files/*[", "ls /*/*/*/*/*/*", "cat /*"]
    lines += ["cp /files/bait.txt /files/bait.txt", "cp /facts /files/x", "mv /files /facts", "mv /files/bait.txt /"]
    lines += ["mv / /files/x", "rm -rf /", "rm -r /files", "rmdir /", "mkdir -p /files/" + "a/" * 400, "touch /"]
    lines += ["cd /files/bait.txt", "cd /nope", "cd", "cat /files", "wc /files /facts", "stat -j /.afi/search"]
    lines += ["echo x > /facts/x.txt", "echo x > /files/" + "n" * 300, "echo x >> /.afi/manifest.json", "tee"]
    lines += ["echo x | tee /files/a /files/b", "cat > /files/in.bin", "cat /files/bait.txt > /files/bait.txt"]
    lines += ["a" * MAX_LINE, "'" * 1001, '"' * 1001, "\\" * 999, "|" * 500, ";" * 500, ">" * 500, " " * 10_000]
    return lines


STDIN = [b"", b"\x00" * 10, b"\xff\xfe\x00", BOMB_BAIT.encode(), b"a\n" * 100_000, bytes(range(256)) * 64, b"\r\n" * 50]
STDIN += BAD_UTF8


def shell_cases(seed: int, count: int) -> list[tuple[str, bytes]]:
    """Given a seed, return ``count`` or more (command line, input) pairs: the hand list, then generated ones."""
    rng = random.Random(seed)
    cases = [(line, b"") for line in hand_lines()]
    while len(cases) < count:
        feed = rng.choice(STDIN) if rng.random() < 0.2 else b""
        cases.append((shell_line(rng), feed))
    return cases


TYPED = [b"ls /files/%s", b"cat /%s", b"stat /facts/%s.md", b"grep -r %s /", b"grep -rE %s /files", b"search %s"]
TYPED += [b"find / -name %s", b"cat /files/bait.txt | grep %s", b"mkdir -p /files/%s/%s", b"touch /files/%s", b"cd /%s"]
TYPED += [b"rm -r /files/%s", b"echo %s > /files/bytes.txt", b"echo x > /facts/%s.md", b"cp /files/bait.txt /files/%s"]
TYPED += [b"mv /files/%s /files/%s", b"tree /%s", b"wc /working/%s", b"head -n %s /files/bait.txt", b"%s"]


def interactive_lines(seed: int, count: int) -> list[bytes]:
    """Lines typed at the interactive prompt, with names that are often not UTF-8 (they arrive as surrogates)."""
    rng = random.Random(seed)
    lines: list[bytes] = [b"a" * 1_000_000, b"grep -r " + b"\xff" * 100_000 + b" /"]
    while len(lines) < count:
        template = rng.choice(TYPED)
        names = tuple(hostile_name_bytes(rng).translate(None, b"\r\n") or b"_" for _ in range(template.count(b"%s")))
        lines.append(template % names)
    return lines


SFTP_OPS = ["stat", "lstat", "listdir", "mkdir", "rmdir", "remove", "rename", "posix_rename", "readlink", "realpath"]
SFTP_OPS += ["symlink", "link", "truncate", "chmod", "utime", "statvfs", "read", "write", "resize", "fsync"]
PFLAGS = [asyncssh.FXF_READ, asyncssh.FXF_WRITE, asyncssh.FXF_WRITE | asyncssh.FXF_CREAT, asyncssh.FXF_APPEND]
PFLAGS += [asyncssh.FXF_WRITE | asyncssh.FXF_CREAT | asyncssh.FXF_EXCL, asyncssh.FXF_WRITE | asyncssh.FXF_TRUNC]
PFLAGS += [asyncssh.FXF_READ | asyncssh.FXF_WRITE, asyncssh.FXF_CREAT, asyncssh.FXF_EXCL, 0, 0xFFFFFFFF]
UINT64 = [n for n in HOSTILE_INTS if 0 <= n < 2**64] + [2**64 - 1, 10**9, 16 << 20, (16 << 20) + 1]


def sftp_path(rng: random.Random) -> bytes:
    """Given a generator, return a hostile SFTP path: a hostile text path, or an area and bytes that are not UTF-8."""
    if rng.random() < 0.5:
        return hostile_path(rng).encode("utf-8", "surrogatepass")
    area = rng.choice([b"/files/", b"/facts/", b"/", b"", b"/working/", b"/history/", b"/.afi/", b"../"])
    return area + b"/".join(hostile_name_bytes(rng) for _ in range(rng.randrange(1, 3)))


def sftp_cases(seed: int, count: int) -> list[tuple[str, tuple[Any, ...]]]:
    """Given a seed, return ``count`` or more (operation, arguments): the hand list, then generated ones."""
    rng = random.Random(seed)
    bait = b"/files/bait.txt"
    cases: list[tuple[str, tuple[Any, ...]]] = []
    for number in UINT64:
        cases += [("read", (bait, asyncssh.FXF_READ, number, 100)), ("write", (b"/files/w.bin", PFLAGS[2], number, 1))]
        cases += [("truncate", (b"/files/t.bin", number)), ("resize", (b"/files/r.bin", number))]
        cases += [("write", (b"/facts/w.md", PFLAGS[2], number, 1)), ("truncate", (bait, number))]
    cases += [("rename", (bait, b"/facts/bait.md")), ("rename", (b"/files", b"/files/in")), ("rmdir", (b"/",))]
    cases += [("remove", (b"/files",)), ("mkdir", (b"/files/" + b"d/" * 300,)), ("posix_rename", (b"/files", b"/"))]
    while len(cases) < count:
        op = rng.choice(SFTP_OPS)
        first, second = sftp_path(rng), sftp_path(rng)
        if op in ("rename", "posix_rename", "symlink", "link"):
            cases.append((op, (first, second)))
        elif op in ("truncate", "resize"):
            cases.append((op, (first, rng.choice(UINT64))))
        elif op in ("read", "write"):
            cases.append((op, (first, rng.choice(PFLAGS), rng.choice(UINT64), rng.choice([0, 1, 100, 65536]))))
        else:
            cases.append((op, (first,)))
    return cases


RPC_PARAMS = {
    "manifest": [],
    "stat": ["path"],
    "list": ["path", "limit", "cursor", "glob"],
    "read": ["path", "offset", "length"],
    "search": ["query", "path", "limit", "cursor", "x-context", "x-kinds", "x-as-of", "x-budget"],
    "write": ["path", "data", "text", "offset", "append", "create_only", "if_match"],
    "mkdir": ["path", "parents"],
    "delete": ["path", "recursive"],
    "move": ["from", "to", "overwrite"],
}


def _rpc_value(rng: random.Random, name: str) -> Any:
    if rng.random() < 0.15:
        return rng.choice(WRONG_TYPES)
    if name in ("path", "from", "to"):
        return hostile_path(rng)
    if name in ("limit", "offset", "length", "x-context", "x-budget"):
        return rng.choice(HOSTILE_INTS)
    if name == "cursor":
        return rng.choice(BOGUS_CURSORS)
    if name == "query":
        roll = rng.random()
        if roll < 0.4:
            return {"regex": rng.choice(BAD_REGEXES), "flags": rng.choice(["", "i", "z"])}
        return (
            hostile_text(rng) if roll < 0.7 else {"semantic": hostile_text(rng), "threshold": rng.choice([-1, 2, 0.5])}
        )
    if name == "data":
        return rng.choice(["", "!!", "YQ", "=", "YWJj", "A" * 100_001, hostile_text(rng)])
    if name in ("append", "create_only", "parents", "recursive", "overwrite"):
        return rng.random() < 0.5
    return hostile_text(rng)


def rpc_lines(seed: int, count: int) -> list[bytes]:
    """Given a seed, return lines for the ``afi`` subsystem: broken JSON and JSON-RPC, and hostile calls."""
    rng = random.Random(seed)
    lines = [body.replace(b"\n", b" ").replace(b"\r", b" ") for body in malformed_json(rng)]
    lines += [b'{"jsonrpc": "2.0", "id": 1, "method": "stat", "params": {"path": "/files/\\ud800"}}']
    lines += [b'{"jsonrpc": "2.0", "id": 1, "method": "stat", "params": {"path": "/files/\xff"}}']
    lines += [b'{"jsonrpc": "2.0", "id": ' + b"[" * 5000 + b"]" * 5000 + b', "method": "stat"}']
    lines += [b'{"jsonrpc": "2.0", "method": "write", "params": {"path": "/files/n.txt", "text": "x"}}']
    while len(lines) < count:
        method = rng.choice([*RPC_PARAMS, "nope", "", "__init__", "_call"])
        names = [name for name in RPC_PARAMS.get(method, ["path"]) if rng.random() < 0.7]
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": rng.choice([1, "a", None, 1.5, [], {}]), "method": method}
        request["params"] = {name: _rpc_value(rng, name) for name in names}
        if rng.random() < 0.1:
            request[rng.choice(["jsonrpc", "method", "params", "id"])] = rng.choice(WRONG_TYPES)
        if rng.random() < 0.05:
            del request["id"]
        lines.append(json.dumps(request).encode("utf-8", "surrogatepass"))
    return lines
