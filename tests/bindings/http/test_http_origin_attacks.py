"""Loose Origins and Hosts against a keyless ``afi serve``: a foreign page or name never reaches the memory.

Without API keys the server answers only to this machine, and a browser is on this machine: the
``Origin`` a page sends and the ``Host`` a (DNS-rebound) name sends are the guard. Each hostile value
below names a foreign host while looking loopback to a loose parser (userinfo, a port running into a
domain, a bracketed address with a suffix, a second header after a loopback one). Every one goes,
as raw bytes, to every verb of the HTTP binding, the web page and ``/mcp``: accepted, zero.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.http_raw import exchange
from tests.support.servers import AfiServer, serve_store

BAIT = "/files/bait.txt"
MCP_LIST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()


def loose_origins(port: int) -> list[list[str]]:
    """Origin headers (one list: the values sent, in order) naming a foreign page."""
    single = [
        "https://localhost:443@evil.example",
        f"http://localhost:{port}@evil.example",
        "http://localhost@evil.example",
        "http://127.0.0.1@evil.example",
        "http://[::1]@evil.example",
        f"http://127.0.0.1:{port}.evil.example",
        "http://127.0.0.1.evil.example",
        f"http://localhost:{port}.evil.example",
        "http://[::1].evil.example",
        f"http://[::1]:{port}.evil.example",
        "http://[::ffff:127.0.0.1].evil.example",
        f"http://127.0.0.1:{port}:evil.example",
        "http://127.0.0.1 evil.example",
        "http://127.0.0.1,http://evil.example",
        "http://127.0.0.1 http://evil.example",
        "http://evil.example\\@127.0.0.1",
        "http://evil.example#@127.0.0.1",
        "http://evil.example?@127.0.0.1",
        f"http://localhost:{port}/@evil.example",
        "http://localhost:99999@evil.example",
        "chrome-extension://localhost",
        "ws://127.0.0.1",
    ]
    cases = [[value] for value in single]
    cases += [[f"http://127.0.0.1:{port}", "https://evil.example"], ["http://localhost", "null"]]
    cases += [["https://evil.example", f"http://127.0.0.1:{port}"]]
    return cases


def loose_hosts(port: int) -> list[list[str]]:
    """Host headers naming a foreign (DNS-rebound) name."""
    single = [
        "localhost:443@evil.example",
        f"127.0.0.1:{port}@evil.example",
        f"127.0.0.1:{port}.evil.example",
        "[::1].evil.example",
        f"[::1]:{port}.evil.example",
        f"127.0.0.1:{port}:evil.example",
        "localhost evil.example",
        "127.0.0.1,evil.example",
        f"localhost:{port}/evil.example",
    ]
    return [[value] for value in single] + [[f"127.0.0.1:{port}", "evil.example"], ["localhost", "evil.example"]]


def verbs() -> list[tuple[str, str, bytes]]:
    """(method, target, body) of every verb, the web page and MCP; each would succeed from loopback."""
    move = json.dumps({"from": BAIT, "to": "/files/moved.txt"}).encode()
    search = json.dumps({"query": "bait"}).encode()
    return [
        ("GET", f"/afi/read?path={BAIT}", b""),
        ("GET", f"/afi/stat?path={BAIT}", b""),
        ("GET", "/afi/list?path=/files", b""),
        ("PUT", "/afi/write?path=/files/pwned.txt", b"pwned"),
        ("DELETE", f"/afi/delete?path={BAIT}", b""),
        ("POST", "/afi/move", move),
        ("POST", "/afi/mkdir", json.dumps({"path": "/files/pwned"}).encode()),
        ("POST", "/afi/search", search),
        ("GET", f"/ui/browse?path={BAIT}", b""),
        ("POST", "/mcp", MCP_LIST),
    ]


def request(method: str, target: str, body: bytes, headers: list[tuple[str, str]]) -> bytes:
    fields = [*headers, ("Content-Type", "application/json"), ("Connection", "close")]
    if target == "/mcp":
        fields += [("Accept", "application/json, text/event-stream"), ("X-Mcp-Stateless", "true")]
    if body or method in ("POST", "PUT"):
        fields.append(("Content-Length", str(len(body))))
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields)
    return head.encode("latin-1") + b"\r\n" + body


@pytest.fixture(scope="module")
def keyless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    base = tmp_path_factory.mktemp("afi-origins")
    with serve_store(base / "afi.db", base / "files") as server:
        put = httpx.put(server.url + "/afi/write", params={"path": BAIT}, content=b"a bait file")
        assert put.status_code == 200, put.text
        yield server


def test_loose_origins_and_hosts_are_refused_at_every_verb(keyless: AfiServer) -> None:
    split = urlsplit(keyless.url)
    address, port = (split.hostname or "127.0.0.1", split.port or 80), split.port or 80
    own_host = ("Host", f"127.0.0.1:{port}")
    families = [[own_host, *(("Origin", value) for value in values)] for values in loose_origins(port)]
    families += [[("Host", value) for value in values] for values in loose_hosts(port)]
    tried, accepted, refused_plainly = 0, [], 0
    for method, target, body in verbs():
        for headers in families:
            tried += 1
            answer = exchange(address, request(method, target, body, headers))
            assert answer is not None, f"no answer to {method} {target} {headers}"
            if answer.status < 400:
                accepted.append(f"{method} {target} {headers}: {answer.status}")
            elif answer.status in (400, 403):
                refused_plainly += 1
    summary = f"loose Origins and Hosts: {tried} cases tried, {len(accepted)} accepted"
    print(summary)
    assert not accepted, summary + ":\n" + "\n".join(accepted[:60])
    assert refused_plainly == tried, f"{tried - refused_plainly} refusals were not 400 or 403"
    listing = httpx.get(keyless.url + "/afi/list", params={"path": "/files"}).json()
    assert [e["path"] for e in listing["entries"]] == [BAIT], "a refused request changed the workspace"


@pytest.mark.parametrize(
    "origin",
    ["http://localhost:3000", "http://127.0.0.1", "https://127.0.0.1:8443", "http://[::1]:5173", "HTTP://LOCALHOST"],
)
def test_a_loopback_page_still_reaches_every_verb(keyless: AfiServer, origin: str) -> None:
    """The control: the same requests with an exact loopback Origin are served, so the refusals above
    are the Origin's, not the requests'."""
    split = urlsplit(keyless.url)
    address = (split.hostname or "127.0.0.1", split.port or 80)
    headers = [("Host", split.netloc), ("Origin", origin)]
    for method, target, body in verbs():
        if method in ("PUT", "DELETE", "POST") and target != "/afi/search" and target != "/mcp":
            continue  # the writes are exercised without moving the bait away
        answer = exchange(address, request(method, target, body, headers))
        assert answer is not None and answer.status == 200, f"{method} {target}: {answer}"
