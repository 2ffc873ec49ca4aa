"""Bytes that are not UTF-8 in a request to ``afi serve``: a 400 ``invalid_path``, never a renamed file.

A percent-encoded query or URL path is decoded strictly: ``PUT /afi/write?path=/files/bad%FF.txt``
used to store ``/files/bad\\uFFFD.txt`` (a lossy decode put U+FFFD where the byte was) and answer 200.
A JSON body is UTF-8 too; one that is not is refused with a message saying so. The same bytes go to
``/mcp``, whose JSON-RPC body the SDK refuses. Nothing reaches the store in any case.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import quote_from_bytes, urlsplit

import httpx
import pytest

from tests.support.hostile import BAD_UTF8, Tally
from tests.support.http_raw import exchange
from tests.support.servers import AfiServer, serve_store

SEED_FILE = "/files/seed.txt"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    base = tmp_path_factory.mktemp("afi-not-utf8")
    with serve_store(base / "afi.db", base / "files") as running:
        assert httpx.put(running.url + "/afi/write", params={"path": SEED_FILE}, content=b"seed").status_code == 200
        yield running


def _names(server: AfiServer) -> set[str]:
    """Every name in the space's workspace folder on disk, and every ledger session the store holds."""
    folder = server.root / "default"
    on_disk = {p.name for p in folder.rglob("*")} if folder.exists() else set()
    sessions = httpx.get(server.url + "/afi/list", params={"path": "/sessions"}).json().get("entries", [])
    return on_disk | {e["path"] for e in sessions}


def _raw(server: AfiServer, method: str, target: bytes, body: bytes = b"", content_type: str = "") -> tuple[int, dict]:
    head = method.encode() + b" " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    if content_type:
        head += f"Content-Type: {content_type}\r\n".encode()
    if body or method in ("POST", "PUT"):
        head += b"Content-Length: %d\r\n" % len(body)
    split = urlsplit(server.url)
    answer = exchange((split.hostname or "127.0.0.1", split.port or 80), head + b"\r\n" + body)
    assert answer is not None
    try:
        parsed = json.loads(answer.body)
    except ValueError:
        parsed = {"raw": answer.body[:200].decode("latin-1")}
    return answer.status, parsed


def test_put_of_a_path_that_is_not_utf8_is_invalid_path(server: AfiServer) -> None:
    status, body = _raw(server, "PUT", b"/afi/write?path=/files/bad%FF.txt", b"x")
    assert status == 400 and body["error"]["code"] == "invalid_path", body
    assert "UTF-8" in body["error"]["message"] and body["error"]["path"] == "/files/bad\\xff.txt", body
    assert not any("bad" in name for name in _names(server))


def cases() -> list[tuple[str, str, bytes, bytes, str]]:
    """(name, method, target, body, content type) with bytes that are not UTF-8, at every route kind."""
    out: list[tuple[str, str, bytes, bytes, str]] = []
    for i, bad in enumerate(BAD_UTF8):
        q = quote_from_bytes(b"/files/n" + bad + b".txt", safe="/").encode()
        out += [
            (f"write{i}", "PUT", b"/afi/write?path=" + q, b"x", ""),
            (f"stat{i}", "GET", b"/afi/stat?path=" + q, b"", ""),
            (f"read{i}", "GET", b"/afi/read?path=" + q, b"", ""),
            (f"list{i}", "GET", b"/afi/list?path=/files&glob=" + quote_from_bytes(bad).encode(), b"", ""),
            (f"delete{i}", "DELETE", b"/afi/delete?path=" + q, b"", ""),
            (
                f"space{i}",
                "PUT",
                b"/spaces/s" + quote_from_bytes(bad).encode() + b"/afi/write?path=/files/s.txt",
                b"x",
                "",
            ),
        ]
        ledger = json.dumps({"messages": [{"role": "user", "text": "hi", "entry_id": f"e{i}"}]}).encode()
        out.append(
            (
                f"ledger{i}",
                "POST",
                b"/ledger/s" + quote_from_bytes(bad).encode() + b"/append",
                ledger,
                "application/json",
            )
        )
        name = b"/files/j" + bad + b".txt"
        for route, body in [
            ("/afi/mkdir", b'{"path": "' + name + b'"}'),
            ("/afi/move", b'{"from": "' + SEED_FILE.encode() + b'", "to": "' + name + b'"}'),
            ("/afi/search", b'{"query": "seed", "path": "' + name + b'"}'),
        ]:
            out.append((f"json{i}:{route}", "POST", route.encode(), body, "application/json"))
    return out


def test_bytes_that_are_not_utf8_are_refused_at_every_route(server: AfiServer) -> None:
    tally = Tally("HTTP bytes that are not UTF-8")
    before = _names(server)
    for name, method, target, body, content_type in cases():
        tally.tried += 1
        status, answer = _raw(server, method, target, body, content_type)
        error = answer.get("error") if isinstance(answer, dict) else None
        if status != 400 or not isinstance(error, dict) or error.get("code") != "invalid_path":
            tally.fail(name, f"{status} {answer!r:.200}")
        elif "UTF-8" not in error.get("message", ""):
            tally.fail(name, f"the message does not say why: {error['message']!r}")
    after = _names(server)
    if after != before:
        tally.fail("the store", f"new names: {sorted(after - before)!r}")
    print(tally.report())
    assert tally.tried >= 100
    assert not tally.failures, tally.report()


def test_a_json_rpc_body_that_is_not_utf8_writes_nothing_through_mcp(server: AfiServer) -> None:
    call = {"name": "afi.write", "arguments": {"path": "/files/mcpBAD.txt", "data": "x"}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}).encode()
    tally = Tally("MCP bodies that are not UTF-8")
    for bad in BAD_UTF8:
        tally.tried += 1
        response = httpx.post(
            server.url + "/mcp",
            content=body.replace(b"BAD", bad),
            headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                     "X-Mcp-Stateless": "true"},
        )  # fmt: skip
        answer = response.json()
        if response.status_code != 400 or "error" not in answer or "result" in answer:
            tally.fail(bad, f"{response.status_code} {answer!r:.200}")
    if any("mcp" in name for name in _names(server)):
        tally.fail("the store", "a file was written")
    assert not tally.failures, tally.report()
