"""The shell's grammar and grep's pattern translation, and the afi subsystem's JSON-RPC refusals."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from afi.bindings.ssh.grep import bre_to_python, grep_query
from afi.bindings.ssh.parse import Word, parse_line
from afi.errors import InvalidPath
from tests.support.ssh import OPTS, SshServer


def test_words_quotes_and_globs() -> None:
    (pipeline,) = parse_line("""grep -r 'a b' "c \\"d\\"" e\\ f /facts/*.md '*.md'""")
    words = pipeline.commands[0].words
    assert [w.text for w in words] == ["grep", "-r", "a b", 'c "d"', "e f", "/facts/*.md", "*.md"]
    assert [w.glob for w in words][-2:] == [True, False]


def test_pipes_redirections_and_sequences() -> None:
    first, second = parse_line("grep -r x / | head -n 3 > /files/out.txt; echo hi>>/files/log")
    assert [c.name for c in first.commands] == ["grep", "head"]
    assert (first.redirect, first.append) == ("/files/out.txt", False)
    assert (second.redirect, second.append) == ("/files/log", True)
    assert second.commands[0].words == [Word("echo"), Word("hi")]
    assert parse_line("grep '|' /x")[0].commands[0].words[1].text == "|"


@pytest.mark.parametrize(
    "line",
    ["cat 'open", 'cat "open', "| head", "cat x |", "echo x >", "cat < x", "sleep 1 &", "echo a > f g"],
)
def test_lines_the_shell_refuses(line: str) -> None:
    with pytest.raises(InvalidPath):
        parse_line(line)


@pytest.mark.parametrize(
    ("bre", "text", "hit"),
    [
        ("c.nary", "the canary", True),
        ("a\\(b\\)*c", "ac abbc", True),
        ("x{2}", "x{2}", True),
        ("x\\{2\\}", "xx", True),
        ("a|b", "a|b", True),
        ("a\\|b", "b", True),
        ("*star", "*star", True),
        ("[[:digit:]]\\+", "abc 42", True),
        ("^the", "not the", False),
    ],
)
def test_bre_translation_matches_like_gnu(bre: str, text: str, hit: bool) -> None:
    assert bool(re.search(bre_to_python(bre), text)) is hit


def test_plain_patterns_are_exact_queries_and_others_regex() -> None:
    assert grep_query("canary", extended=False, fixed=False, ignore_case=False, word=False) == "canary"
    assert grep_query("a.b", extended=False, fixed=True, ignore_case=False, word=False) == "a.b"
    regex = grep_query("can", extended=False, fixed=False, ignore_case=True, word=True)
    assert isinstance(regex, dict) and regex["flags"] == "i"
    assert re.search(regex["regex"], "a CAN here", re.I) and not re.search(regex["regex"], "canary", re.I)


def _subsystem(ssh_served: SshServer, lines: list[str]) -> list[dict[str, object]]:
    cmd = ["ssh", "-p", str(ssh_served.port), "-i", str(ssh_served.keys["writer"]), *OPTS, "-s", "127.0.0.1", "afi"]
    done = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_subsystem_answers_one_line_per_request_and_refuses_clearly(ssh_served: SshServer) -> None:
    answers = _subsystem(
        ssh_served,
        [
            json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "write", "params": {"path": "/files/r.txt", "text": "hi"}}
            ),
            json.dumps({"jsonrpc": "2.0", "id": 2, "method": "read", "params": {"path": "/files/r.txt"}}),
            json.dumps({"jsonrpc": "2.0", "method": "stat", "params": {"path": "/"}}),  # a notification
            "{not json",
            json.dumps({"jsonrpc": "2.0", "id": 3, "method": "chmod", "params": {}}),
            json.dumps({"jsonrpc": "2.0", "id": 4, "method": "stat", "params": {"path": 7}}),
            json.dumps({"jsonrpc": "2.0", "id": 5, "method": "stat", "params": {"path": "/../x"}}),
            json.dumps({"jsonrpc": "2.0", "id": 6, "method": "search", "params": {"query": {"nope": 1}}}),
        ],
    )
    by_id = {a.get("id"): a for a in answers}
    assert len(answers) == 7
    assert by_id[1]["result"]["path"] == "/files/r.txt"  # type: ignore[index]
    assert by_id[2]["result"]["data"] == "aGk=" and by_id[2]["result"]["eof"] is True  # type: ignore[index]
    assert by_id[None]["error"]["code"] == -32700  # type: ignore[index]
    assert by_id[3]["error"]["code"] == -32601  # type: ignore[index]
    assert by_id[4]["error"]["code"] == -32602  # type: ignore[index]
    assert by_id[5]["error"]["data"]["code"] == "invalid_path"  # type: ignore[index]
    assert by_id[6]["error"]["data"]["code"] == "invalid_path"  # type: ignore[index]


def test_an_unknown_subsystem_is_refused(ssh_served: SshServer) -> None:
    cmd = ["ssh", "-p", str(ssh_served.port), "-i", str(ssh_served.keys["writer"]), *OPTS, "-s", "127.0.0.1", "shell"]
    done = subprocess.run(cmd, input="", capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "afi: unsupported: no subsystem 'shell'" in done.stderr
