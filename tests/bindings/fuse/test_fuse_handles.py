"""The per-handle state of the FUSE binding: write buffers, the search answer, NDJSON rendering."""

from __future__ import annotations

import json

import pytest

from afi.bindings.fuse.handles import SEARCH_USAGE, SearchHandle, WriteHandle, render_matches
from afi.errors import InvalidPath, NotFound
from afi.model import Match, MatchPage


def test_a_write_buffer_places_chunks_pads_gaps_and_truncates() -> None:
    handle = WriteHandle(ino=2, path="/files/a", buffer=bytearray(b"hello world"))
    handle.put(6, b"there")
    assert bytes(handle.buffer or b"") == b"hello there" and handle.dirty
    handle.put(13, b"!")
    assert bytes(handle.buffer or b"") == b"hello there\x00\x00!"
    handle.truncate(5)
    assert bytes(handle.buffer or b"") == b"hello"
    handle.truncate(7)
    assert bytes(handle.buffer or b"") == b"hello\x00\x00"


def test_matches_render_as_ndjson_ending_with_an_empty_line() -> None:
    page = MatchPage(matches=[Match(path="/a", line=1, text="x"), Match(path="/b", line=2, text="y")])
    lines = render_matches(page).decode().split("\n")
    assert [json.loads(line)["path"] for line in lines[:2]] == ["/a", "/b"]
    assert lines[2:] == ["", ""]
    assert render_matches(MatchPage(matches=[])) == b"\n"


def test_a_cursor_line_comes_before_the_empty_line() -> None:
    page = MatchPage(matches=[Match(path="/a", line=1, text="x")], next_cursor="abc")
    lines = render_matches(page).decode().split("\n")
    assert json.loads(lines[1]) == {"next_cursor": "abc"} and lines[2:] == ["", ""]


def test_a_search_handle_waits_for_whole_json() -> None:
    handle = SearchHandle()
    handle.request.extend(b'{"query": "wo')
    assert handle.parsed() is None
    handle.request.extend(b'rd", "path": "/facts"}')
    request = handle.parsed()
    assert request is not None and request.query == "word" and request.path == "/facts"


@pytest.mark.parametrize("body", [b"[1, 2]", b'{"query": {"fuzzy": "x"}}', b'{"path": "/"}'], ids=str)
def test_a_search_handle_refuses_what_is_no_request(body: bytes) -> None:
    handle = SearchHandle(request=bytearray(body))
    with pytest.raises(InvalidPath):
        handle.parsed()


def test_reading_a_search_handle() -> None:
    fresh = SearchHandle()
    assert fresh.read(0, 1 << 16) == SEARCH_USAGE
    incomplete = SearchHandle(request=bytearray(b'{"query"'))
    assert json.loads(incomplete.read(0, 1 << 16).split(b"\n")[0])["error"]["code"] == "invalid_path"
    failed = SearchHandle(request=bytearray(b"{}"))
    failed.fail(NotFound("no such folder", path="/nope"))
    assert json.loads(failed.read(0, 1 << 16).split(b"\n")[0])["error"] == {
        "code": "not_found",
        "message": "no such folder",
        "path": "/nope",
    }


def test_a_shell_reads_the_answer_on_from_its_write_offset() -> None:
    request = b'{"query": "x"}'
    shell = SearchHandle(request=bytearray(request), answer=b"ANSWER\n\n")
    assert shell.read(len(request), 100) == b"ANSWER\n\n"
    program = SearchHandle(request=bytearray(request), answer=b"ANSWER\n\n")
    assert program.read(0, 3) == b"ANS" and program.read(3, 100) == b"WER\n\n"
