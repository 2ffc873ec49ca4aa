"""Hostile requests against a live ``afi serve``: every input error is a 4xx with the AFI error body.

The corpus (``tests/support/http_corpus.py``) goes out as raw bytes on a socket. A 500 is a bug, never an
answer to bad input; so is a 4xx without ``{"error": {code, message, path?}}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from afi.errors import HTTP_STATUS
from tests.support.http_corpus import FILE, Case, corpus
from tests.support.http_raw import Answer, exchange
from tests.support.servers import AfiServer, start_afi_serve


def problem_of(case: Case, answer: Answer | None) -> str | None:
    """Given a case and its answer, return what is wrong with it (None for a sound answer to bad input).

    A refusal carries ``{"error": {code, message}}``; at ``/mcp`` that body is the ``data`` of a
    JSON-RPC error. A HEAD answer has no body, so only its status counts.
    """
    if answer is None:
        return "no answer"
    if answer.status >= 500:
        return f"{answer.status}: {answer.body[:200]!r}"
    if answer.status < 400 or case.raw.startswith(b"HEAD "):
        return None
    try:
        error = json.loads(answer.body)["error"]
        if "jsonrpc" in json.loads(answer.body):
            error = error["data"]
    except (ValueError, KeyError, TypeError):
        return f"{answer.status} without the AFI error body: {answer.body[:200]!r}"
    if not isinstance(error, dict) or error.get("code") not in HTTP_STATUS or not isinstance(error.get("message"), str):
        return f"{answer.status} with a malformed error: {error!r:.200}"
    return None


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    base = tmp_path_factory.mktemp("afi-attacks")
    with start_afi_serve(base / "afi.db", base / "files") as server:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            assert (
                http.put("/afi/write", params={"path": FILE}, content=b"abcdefghijklmnopqrstuvwxyz").status_code == 200
            )
            assert http.put("/afi/write", params={"path": "/facts/bait.md"}, content=b"a bait fact").status_code == 200
        yield server


def test_the_corpus_is_large_and_deterministic() -> None:
    first, second = corpus(), corpus()
    assert len(first) >= 1000
    assert [c.raw for c in first] == [c.raw for c in second]


def test_no_hostile_request_gets_a_500_or_a_bare_error(target: AfiServer) -> None:
    split = urlsplit(target.url)
    address = (split.hostname or "127.0.0.1", split.port or 80)
    cases = corpus()
    failures = []
    for case in cases:
        problem = problem_of(case, exchange(address, case.raw))
        if problem is not None:
            failures.append(f"{case.name}: {problem}")
    assert target.process is not None and target.process.poll() is None, "the server died"
    assert httpx.get(target.url + "/.afi/manifest.json", timeout=10).status_code == 200
    summary = f"{len(cases)} hostile requests, {len(failures)} failures"
    print(summary)
    assert not failures, summary + ":\n" + "\n".join(failures[:200])
    base = target.db.parent
    outside = [p for p in base.iterdir() if p != target.root and not p.name.startswith(target.db.name)]
    assert not outside, f"written beside the store and the workspace root: {outside[:5]}"


def _error(response: httpx.Response) -> dict[str, str]:
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, str] = body["error"]
    return error


def test_a_lone_surrogate_in_a_json_path_is_invalid_path(target: AfiServer) -> None:
    body = b'{"path": "/files/\\ud800"}'  # as JSON spells it; UTF-8 cannot carry it
    response = httpx.post(target.url + "/afi/mkdir", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert _error(response)["code"] == "invalid_path" and _error(response)["path"] == "/files/\\ud800"


def test_a_range_past_any_number_is_the_rest_and_416_carries_the_error(target: AfiServer) -> None:
    path, read = "/files/range.txt", target.url + "/afi/read"
    assert httpx.put(target.url + "/afi/write", params={"path": path}, content=b"0123456789").status_code == 200
    rest = httpx.get(read, params={"path": path}, headers={"Range": "bytes=1-" + "9" * 5000})
    assert rest.status_code == 206 and rest.headers["content-range"] == "bytes 1-9/10" and rest.content == b"123456789"
    past = httpx.get(read, params={"path": path}, headers={"Range": "bytes=" + "9" * 5000 + "-"})
    assert past.status_code == 416 and past.headers["content-range"] == "bytes */10"
    assert _error(past)["code"] == "invalid_path" and _error(past)["path"] == path
    suffix = httpx.get(read, params={"path": path}, headers={"Range": "bytes=-" + "9" * 5000})
    assert suffix.status_code == 206 and suffix.content == b"0123456789"


def test_a_request_h11_cannot_parse_gets_the_error_body(target: AfiServer) -> None:
    split = urlsplit(target.url)
    answer = exchange((split.hostname or "", split.port or 80), b"GET /afi/stat?path=/ HTTQ/1.1\r\n\r\n")
    assert answer is not None and answer.status == 400
    assert json.loads(answer.body)["error"]["code"] == "invalid_path"


def test_a_refused_cors_preflight_gets_the_error_body(target: AfiServer) -> None:
    headers = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "PATCH"}
    response = httpx.options(target.url + "/afi/stat", headers=headers)
    assert response.status_code == 400 and "Disallowed CORS method" in _error(response)["message"]


def test_the_mcp_endpoint_answers_an_unknown_method_405_with_the_error(target: AfiServer) -> None:
    response = httpx.request("PATCH", target.url + "/mcp")
    assert response.status_code == 405 and response.headers["allow"] == "GET, POST, DELETE"
    assert response.json()["error"]["data"]["code"] == "unsupported"
