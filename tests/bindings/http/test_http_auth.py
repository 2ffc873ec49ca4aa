"""Credentials, spaces, CORS, body caps and rate limits of the HTTP binding, against real servers."""

from __future__ import annotations

import secrets
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from afi.auth.ratelimit import RateLimiter
from afi.bindings.http import create_app
from tests.support.servers import AfiServer, serve_app_in_thread


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_missing_token_is_401_with_a_discoverable_challenge(afi_server: AfiServer) -> None:
    response = httpx.get(afi_server.url + "/afi/stat", params={"path": "/"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{afi_server.url}/.well-known/oauth-protected-resource"' in challenge
    assert 'scope="afi:read afi:write"' in challenge
    assert "invalid_token" not in challenge


def test_a_bad_token_is_401_invalid_token(afi_server: AfiServer) -> None:
    response = httpx.get(afi_server.url + "/afi/stat", params={"path": "/"}, headers=bearer("afi_" + "x" * 43))
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_another_scheme_is_refused(afi_server: AfiServer) -> None:
    response = httpx.get(afi_server.url + "/afi/stat", params={"path": "/"}, headers={"Authorization": "Basic eDp5"})
    assert response.status_code == 401


def test_protected_resource_metadata(afi_server: AfiServer) -> None:
    meta = httpx.get(afi_server.url + "/.well-known/oauth-protected-resource").json()
    assert meta["resource"] == afi_server.url
    assert meta["bearer_methods_supported"] == ["header"]
    # The scopes an authorization request may ask for: the built-in server grants read and write only,
    # and a client registering for every listed scope must not be refused (MCP Inspector does that).
    assert meta["authorization_servers"] == [afi_server.url]
    assert set(meta["scopes_supported"]) == {"afi:read", "afi:write"}
    registered = httpx.post(
        afi_server.url + "/oauth/register",
        json={"redirect_uris": ["http://127.0.0.1:6276/cb"], "scope": " ".join(meta["scopes_supported"])},
    )
    assert registered.status_code == 201, registered.text
    spaced = httpx.get(afi_server.url + "/.well-known/oauth-protected-resource/spaces/other").json()
    assert spaced["resource"] == afi_server.url + "/spaces/other"


@pytest.mark.parametrize("name", ["access_token", "token"])
def test_a_token_in_the_query_string_is_refused(afi_server: AfiServer, name: str) -> None:
    token = afi_server.tokens["writer"]
    response = httpx.get(afi_server.url + "/afi/stat", params={"path": "/", name: token})
    assert response.status_code == 400
    assert "Authorization: Bearer" in response.json()["error"]["message"]


def test_a_read_only_key_reads_but_writing_is_403_and_writes_nothing(afi_server: AfiServer) -> None:
    headers = bearer(afi_server.tokens["reader"])
    path = f"/files/ro-{secrets.token_hex(4)}.txt"
    assert httpx.get(afi_server.url + "/afi/stat", params={"path": "/"}, headers=headers).status_code == 200
    response = httpx.put(afi_server.url + "/afi/write", params={"path": path}, content=b"x", headers=headers)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert "afi:write" in response.json()["error"]["message"]
    writer = bearer(afi_server.tokens["writer"])
    assert httpx.get(afi_server.url + "/afi/stat", params={"path": path}, headers=writer).status_code == 404


def test_a_key_of_another_space_is_401_invalid_token_under_spaces(afi_server: AfiServer) -> None:
    url = afi_server.url + "/spaces/other/afi/stat"
    response = httpx.get(url, params={"path": "/"}, headers=bearer(afi_server.tokens["writer"]))
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert 'error="invalid_token"' in challenge
    assert f'resource_metadata="{afi_server.url}/.well-known/oauth-protected-resource/spaces/other"' in challenge
    own = httpx.get(url, params={"path": "/"}, headers=bearer(afi_server.tokens["other"]))
    assert own.status_code == 200


def test_spaces_are_cloaked_from_each_other(afi_server: AfiServer) -> None:
    path = f"/files/mine-{secrets.token_hex(4)}.txt"
    mine, theirs = bearer(afi_server.tokens["writer"]), bearer(afi_server.tokens["other"])
    assert httpx.put(afi_server.url + "/afi/write", params={"path": path}, content=b"x", headers=mine).is_success
    seen = httpx.get(afi_server.url + "/spaces/default/afi/stat", params={"path": path}, headers=mine)
    assert seen.status_code == 200
    hidden = httpx.get(afi_server.url + "/afi/stat", params={"path": path}, headers=theirs)
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "not_found"
    listed = httpx.get(afi_server.url + "/afi/list", params={"path": "/files"}, headers=theirs).json()
    assert path not in [e["path"] for e in listed["entries"]]


def test_cors_preflight_and_exposed_headers(afi_server: AfiServer) -> None:
    preflight = httpx.options(
        afi_server.url + "/afi/write",
        headers={
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "PUT",
            "Access-Control-Request-Headers": "authorization, if-match",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert "PUT" in preflight.headers["access-control-allow-methods"]
    assert "if-match" in preflight.headers["access-control-allow-headers"].lower()
    simple = httpx.get(afi_server.url + "/.afi/manifest.json", headers={"Origin": "https://app.example"})
    assert simple.headers["access-control-allow-origin"] == "*"


def test_without_keys_the_loopback_caller_is_the_local_owner(open_server: AfiServer) -> None:
    path = f"/files/open-{secrets.token_hex(4)}.txt"
    assert httpx.put(open_server.url + "/afi/write", params={"path": path}, content=b"hi").status_code == 200
    assert httpx.get(open_server.url + "/afi/read", params={"path": path}).content == b"hi"
    manifest = httpx.get(open_server.url + "/.afi/manifest.json").json()
    assert manifest["auth"]["required"] is False


# -- in-thread servers with a small body cap and a rate limit ----------------------------


@pytest.fixture
def capped(tmp_path: Path) -> Iterator[str]:
    from afi.providers.memory.provider import MemoryProvider

    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    with serve_app_in_thread(create_app(provider, max_body_bytes=1024)) as url:
        yield url


def test_a_body_over_the_cap_is_413_and_writes_nothing(capped: str) -> None:
    response = httpx.put(capped + "/afi/write", params={"path": "/files/big.bin"}, content=b"x" * 2048)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"
    assert httpx.get(capped + "/afi/stat", params={"path": "/files/big.bin"}).status_code == 404
    small = httpx.put(capped + "/afi/write", params={"path": "/files/small.bin"}, content=b"x" * 1024)
    assert small.status_code == 200


def test_a_streamed_body_is_counted_and_cut_at_the_cap(capped: str) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(8):
            yield b"y" * 512

    response = httpx.put(capped + "/afi/write", params={"path": "/files/stream.bin"}, content=chunks())
    assert response.status_code == 413
    assert httpx.get(capped + "/afi/stat", params={"path": "/files/stream.bin"}).status_code == 404


def test_413_is_answered_before_the_body_is_sent(capped: str) -> None:
    host, port = capped.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        head = (
            "PUT /afi/write?path=/files/huge.bin HTTP/1.1\r\n"
            f"Host: {host}\r\nContent-Length: 1000000000\r\nContent-Type: application/octet-stream\r\n\r\n"
        )
        sock.sendall(head.encode())
        answer = sock.recv(4096).decode("latin-1")
    assert answer.startswith("HTTP/1.1 413")


def test_a_large_json_body_is_413_too(capped: str) -> None:
    response = httpx.post(capped + "/afi/search", json={"query": "x" * 4096})
    assert response.status_code == 413


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    from afi.providers.memory.provider import MemoryProvider

    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    with serve_app_in_thread(create_app(provider, rate_limit=RateLimiter(0.5, 3))) as url:
        yield url, provider


def test_the_rate_limit_answers_429_with_retry_after(limited: tuple[str, Any]) -> None:
    url, _ = limited
    statuses = [httpx.get(url + "/afi/stat", params={"path": "/"}).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    response = httpx.get(url + "/afi/stat", params={"path": "/"})
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["code"] == "rate_limited" and error["retry_after"] > 0
    assert int(response.headers["retry-after"]) >= 1
    manifest = httpx.get(url + "/.afi/manifest.json").json()
    assert manifest["x-limits"]["rate"]["burst"] == 3


def test_keyless_spaces_are_separate_trees(open_server: AfiServer) -> None:
    path = f"/files/team-{secrets.token_hex(4)}.txt"
    put = httpx.put(open_server.url + "/spaces/team/afi/write", params={"path": path}, content=b"team only")
    assert put.status_code == 200
    assert httpx.get(open_server.url + "/spaces/team/afi/read", params={"path": path}).content == b"team only"
    assert httpx.get(open_server.url + "/afi/stat", params={"path": path}).status_code == 404
    bad = httpx.get(open_server.url + "/spaces/Not_A_Space/afi/stat", params={"path": "/"})
    assert bad.status_code == 400


@pytest.fixture
def team_only(tmp_path: Path) -> Iterator[str]:
    from afi.providers.memory.provider import MemoryProvider

    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    with serve_app_in_thread(create_app(provider, allowed_spaces={"team"}, default_space="team")) as url:
        yield url


def test_a_server_limited_to_one_space(team_only: str) -> None:
    path = "/files/t.txt"
    assert httpx.put(team_only + "/afi/write", params={"path": path}, content=b"t").status_code == 200
    assert httpx.get(team_only + "/spaces/team/afi/read", params={"path": path}).content == b"t"
    refused = httpx.get(team_only + "/spaces/default/afi/stat", params={"path": "/"})
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    assert httpx.get(team_only + "/.well-known/oauth-protected-resource/spaces/default").status_code == 404
