"""The HTTP/JSON binding's routes, with httpx against a real ``afi serve``."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import pytest

from afi.manifest import validate_manifest
from tests.support.servers import AfiServer


@pytest.fixture
def http(afi_server: AfiServer) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {afi_server.tokens['writer']}"}
    with httpx.Client(base_url=afi_server.url, headers=headers, timeout=30) as client:
        yield client


@pytest.fixture
def folder(http: httpx.Client) -> str:
    """A fresh folder under /files with one 26-byte file, ``abc.txt``."""
    path = f"/files/http-{secrets.token_hex(4)}"
    assert http.post("/afi/mkdir", json={"path": path}).status_code == 200
    put = http.put("/afi/write", params={"path": f"{path}/abc.txt"}, content=b"abcdefghijklmnopqrstuvwxyz")
    assert put.status_code == 200, put.text
    return path


def error_of(response: httpx.Response) -> dict[str, object]:
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, object] = body["error"]
    return error


def test_the_manifest_is_public_valid_and_declares_the_body_cap(afi_server: AfiServer) -> None:
    response = httpx.get(afi_server.url + "/.afi/manifest.json")
    assert response.status_code == 200
    data = response.json()
    validate_manifest(data)
    assert data["profile"] == 3 and data["auth"]["required"] is True
    assert data["x-limits"]["max_body_bytes"] == 8 * 1024 * 1024
    assert "rate" not in data["x-limits"]
    assert data["x-bindings"]["http"] == afi_server.url


def test_stat_and_list(http: httpx.Client, folder: str) -> None:
    entry = http.get("/afi/stat", params={"path": f"{folder}/abc.txt"}).json()
    assert (entry["path"], entry["type"], entry["size"]) == (f"{folder}/abc.txt", "file", 26)
    page = http.get("/afi/list", params={"path": folder, "limit": 10}).json()
    assert [e["path"] for e in page["entries"]] == [f"{folder}/abc.txt"]
    assert "next_cursor" not in page


def test_read_answers_raw_bytes_with_headers(http: httpx.Client, folder: str) -> None:
    response = http.get("/afi/read", params={"path": f"{folder}/abc.txt", "offset": 3, "length": 4})
    assert response.status_code == 200
    assert response.content == b"defg"
    assert response.headers["content-type"].startswith("text/plain")
    assert response.headers["accept-ranges"] == "bytes"
    assert response.headers["x-afi-eof"] == "false"
    assert response.headers["x-afi-size"] == "26"
    assert response.headers["etag"].startswith('"')


@pytest.mark.parametrize(
    ("header", "body", "content_range"),
    [
        pytest.param("bytes=2-5", b"cdef", "bytes 2-5/26", id="closed"),
        pytest.param("bytes=20-", b"uvwxyz", "bytes 20-25/26", id="open-ended"),
        pytest.param("bytes=-3", b"xyz", "bytes 23-25/26", id="suffix"),
        pytest.param("bytes=24-999", b"yz", "bytes 24-25/26", id="clamped"),
    ],
)
def test_range_answers_206(http: httpx.Client, folder: str, header: str, body: bytes, content_range: str) -> None:
    response = http.get("/afi/read", params={"path": f"{folder}/abc.txt"}, headers={"Range": header})
    assert response.status_code == 206
    assert response.content == body
    assert response.headers["content-range"] == content_range
    assert response.headers["accept-ranges"] == "bytes"


@pytest.mark.parametrize("header", ["bytes=26-", "bytes=100-200", "bytes=-0"])
def test_unsatisfiable_range_is_416(http: httpx.Client, folder: str, header: str) -> None:
    response = http.get("/afi/read", params={"path": f"{folder}/abc.txt"}, headers={"Range": header})
    assert response.status_code == 416
    assert response.headers["content-range"] == "bytes */26"


def test_etag_and_if_none_match_give_304_until_the_file_changes(http: httpx.Client, folder: str) -> None:
    path = f"{folder}/abc.txt"
    etag = http.get("/afi/read", params={"path": path}).headers["etag"]
    again = http.get("/afi/read", params={"path": path}, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["etag"] == etag
    http.put("/afi/write", params={"path": path}, content=b"changed")
    fresh = http.get("/afi/read", params={"path": path}, headers={"If-None-Match": etag})
    assert fresh.status_code == 200 and fresh.content == b"changed"
    assert fresh.headers["etag"] != etag


def test_write_modes_and_if_match(http: httpx.Client, folder: str) -> None:
    path = f"{folder}/w.txt"
    created = http.put("/afi/write", params={"path": path, "create_only": "true"}, content=b"one\n")
    assert created.status_code == 200 and created.json()["size"] == 4
    again = http.put("/afi/write", params={"path": path, "create_only": "true"}, content=b"two\n")
    assert again.status_code == 409 and error_of(again)["code"] == "conflict"
    appended = http.put("/afi/write", params={"path": path, "append": "true"}, content=b"two\n")
    etag = appended.json()["etag"]
    stale = http.put("/afi/write", params={"path": path}, content=b"x", headers={"If-Match": '"stale-etag"'})
    assert stale.status_code == 409
    ok = http.put("/afi/write", params={"path": path}, content=b"three\n", headers={"If-Match": etag})
    assert ok.status_code == 200
    assert http.get("/afi/read", params={"path": path}).content == b"three\n"


def test_mkdir_move_delete(http: httpx.Client, folder: str) -> None:
    made = http.post("/afi/mkdir", json={"path": f"{folder}/a/b", "parents": True})
    assert made.status_code == 200 and made.json()["type"] == "directory"
    assert http.post("/afi/mkdir", json={"path": f"{folder}/a/b"}).status_code == 409
    moved = http.post("/afi/move", json={"from": f"{folder}/abc.txt", "to": f"{folder}/a/abc.txt"})
    assert moved.status_code == 200 and moved.json()["path"] == f"{folder}/a/abc.txt"
    assert http.get("/afi/stat", params={"path": f"{folder}/abc.txt"}).status_code == 404
    refused = http.delete("/afi/delete", params={"path": f"{folder}/a"})
    assert refused.status_code == 409 and error_of(refused)["code"] == "conflict"
    gone = http.delete("/afi/delete", params={"path": f"{folder}/a", "recursive": "true"})
    assert gone.status_code == 200 and gone.json()["deleted"] >= 1
    assert http.get("/afi/stat", params={"path": f"{folder}/a"}).status_code == 404


def test_search_json_body(http: httpx.Client, folder: str) -> None:
    marker = f"needle-{secrets.token_hex(3)}"
    http.put("/afi/write", params={"path": f"{folder}/s.txt"}, content=f"hay\n{marker}\n".encode())
    exact = http.post("/afi/search", json={"query": marker, "path": folder}).json()
    assert [(m["path"], m["line"], m["text"]) for m in exact["matches"]] == [(f"{folder}/s.txt", 2, marker)]
    regex = http.post("/afi/search", json={"query": {"regex": "NEEDLE-[0-9a-f]+", "flags": "i"}, "path": folder})
    assert [m["line"] for m in regex.json()["matches"]] == [2]
    bad = http.post("/afi/search", json={"query": {"regex": "("}, "path": folder})
    assert bad.status_code == 400 and error_of(bad)["code"] == "invalid_path"


@pytest.mark.parametrize(
    ("method", "url", "kwargs", "status", "code"),
    [
        pytest.param("GET", "/afi/stat", {"params": {"path": "/../x"}}, 400, "invalid_path", id="above-root"),
        pytest.param("GET", "/afi/stat", {"params": {"path": "/files/none-here"}}, 404, "not_found", id="missing"),
        pytest.param("GET", "/afi/list", {"params": {"path": "/", "limit": 0}}, 400, "invalid_path", id="limit-0"),
        pytest.param("GET", "/afi/list", {"params": {"path": "/", "limit": "x"}}, 400, "invalid_path", id="limit-nan"),
        pytest.param("GET", "/afi/stat", {}, 400, "invalid_path", id="no-path"),
        pytest.param("GET", "/afi/read", {"params": {"path": "/files"}}, 400, "invalid_path", id="read-dir"),
        pytest.param("PUT", "/afi/write", {"params": {"path": "/history/x.md"}}, 403, "forbidden", id="read-only"),
        pytest.param("POST", "/afi/search", {"json": {"query": {"fuzzy": "x"}}}, 400, "invalid_path", id="mode"),
        pytest.param("POST", "/afi/move", {"json": {"to": "/files/x"}}, 400, "invalid_path", id="move-no-from"),
        pytest.param("GET", "/afi/nope", {}, 404, "not_found", id="no-route"),
        pytest.param("DELETE", "/afi/stat", {}, 405, "unsupported", id="wrong-method"),
    ],
)
def test_errors_are_afi_json_with_the_mapped_status(
    http: httpx.Client, method: str, url: str, kwargs: dict[str, object], status: int, code: str
) -> None:
    response = http.request(method, url, **kwargs)  # type: ignore[arg-type]
    assert response.status_code == status, response.text
    error = error_of(response)
    assert error["code"] == code and error["message"]


def test_openapi_docs_are_served(afi_server: AfiServer) -> None:
    assert httpx.get(afi_server.url + "/docs").status_code == 200
    spec = httpx.get(afi_server.url + "/openapi.json").json()
    for route in ("/afi/stat", "/afi/list", "/afi/read", "/afi/search", "/afi/write", "/afi/move"):
        assert route in spec["paths"]
    assert "/spaces/{space}/afi/read" in spec["paths"]
