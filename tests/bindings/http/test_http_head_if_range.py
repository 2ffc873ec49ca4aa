"""HEAD and If-Range on the HTTP door, against a real ``afi serve`` through httpx."""

from __future__ import annotations

import secrets

import httpx
import pytest

from tests.support.servers import AfiServer

SKIPPED = {"date"}  # the one header that may differ between two answers a second apart


def _headers(response: httpx.Response) -> dict[str, str]:
    return {name: value for name, value in response.headers.items() if name not in SKIPPED}


@pytest.fixture
def file_path(open_server: AfiServer) -> str:
    path = f"/files/head-{secrets.token_hex(3)}.txt"
    written = httpx.put(open_server.url + "/afi/write", params={"path": path}, content=b"0123456789")
    assert written.status_code == 200, written.text
    return path


@pytest.mark.parametrize("route", ["/afi/read", "/afi/stat"])
def test_head_answers_the_get_headers_without_a_body(open_server: AfiServer, file_path: str, route: str) -> None:
    got = httpx.get(open_server.url + route, params={"path": file_path})
    head = httpx.head(open_server.url + route, params={"path": file_path})
    assert got.status_code == head.status_code == 200
    assert head.content == b"" and got.content
    assert _headers(head) == _headers(got)
    assert int(head.headers["content-length"]) == len(got.content)
    missing = httpx.head(open_server.url + route, params={"path": file_path + ".gone"})
    assert missing.status_code == 404 and missing.content == b""


def test_a_range_with_a_stale_if_range_gets_the_whole_file(open_server: AfiServer, file_path: str) -> None:
    url, params = open_server.url + "/afi/read", {"path": file_path}
    etag = httpx.get(url, params=params).headers["etag"]
    fresh = httpx.get(url, params=params, headers={"Range": "bytes=2-4", "If-Range": etag})
    assert fresh.status_code == 206 and fresh.content == b"234"
    assert fresh.headers["content-range"] == "bytes 2-4/10"
    for stale in ('"an-older-version"', f"W/{etag}", "Wed, 21 Oct 2015 07:28:00 GMT"):
        whole = httpx.get(url, params=params, headers={"Range": "bytes=2-4", "If-Range": stale})
        assert whole.status_code == 200, stale
        assert whole.content == b"0123456789" and "content-range" not in whole.headers
    changed = httpx.put(open_server.url + "/afi/write", params=params, content=b"abcdefghij")
    assert changed.status_code == 200
    after = httpx.get(url, params=params, headers={"Range": "bytes=2-4", "If-Range": etag})
    assert after.status_code == 200 and after.content == b"abcdefghij"
