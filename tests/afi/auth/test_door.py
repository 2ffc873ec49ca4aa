"""The keyless loopback guard: with no API keys, only loopback names and pages reach the memory."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from afi.auth.door import Door, InvalidToken, is_loopback_host, is_loopback_origin
from afi.errors import Forbidden, InvalidPath
from afi.providers.memory.provider import MemoryProvider
from tests.support.servers import AfiServer


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1:8765", True),
        ("localhost", True),
        ("[::1]:8765", True),
        ("127.8.9.10", True),
        ("evil.example:8765", False),
        ("10.0.0.5", False),
        ("[2001:db8::1]:80", False),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("localhost:443@evil.example", False),
        ("127.0.0.1:8765.evil.example", False),
        ("[::1].evil.example", False),
        ("127.0.0.1:8765:evil.example", False),
        ("localhost:99999", False),
        ("[127.0.0.1]", False),
        ("localhost evil.example", False),
        ("[::1", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_loopback_origins() -> None:
    assert is_loopback_origin("http://localhost:3000")
    assert is_loopback_origin("http://127.0.0.1:8765")
    assert is_loopback_origin("https://[::1]:8443")
    assert not is_loopback_origin("https://evil.example")
    assert not is_loopback_origin("http://127.0.0.1@evil.example")
    assert not is_loopback_origin("https://localhost:443@evil.example")
    assert not is_loopback_origin("http://127.0.0.1:8765.evil.example")
    assert not is_loopback_origin("http://[::1].evil.example")
    assert not is_loopback_origin("http://localhost:8765/")
    assert not is_loopback_origin("ws://localhost")
    assert not is_loopback_origin("http://::1")


def test_a_second_host_or_origin_header_is_refused(tmp_path: Path) -> None:
    door = Door(MemoryProvider(tmp_path / "a.db", tmp_path / "files"))
    assert door.admit(authorization=None, host=["127.0.0.1"], origin=["http://localhost"]).principal == "local"
    with pytest.raises(InvalidPath, match="2 Origin headers"):
        door.admit(authorization=None, host=["127.0.0.1"], origin=["http://localhost", "https://evil.example"])
    with pytest.raises(InvalidPath, match="2 Host headers"):
        door.admit(authorization=None, host=["127.0.0.1", "evil.example"])


@pytest.mark.parametrize("origin", ["null", "NULL", " null "])
def test_the_null_origin_is_foreign(tmp_path: Path, origin: str) -> None:
    """Sandboxed iframes, data: and file: pages send ``Origin: null``: any web page can."""
    assert not is_loopback_origin(origin)
    door = Door(MemoryProvider(tmp_path / "a.db", tmp_path / "files"))
    with pytest.raises(Forbidden, match="Origin"):
        door.admit(authorization=None, host="127.0.0.1:8765", origin=origin)


def test_a_null_origin_page_cannot_use_a_keyless_server(open_server: AfiServer) -> None:
    base, null = open_server.url, {"Origin": "null"}
    read = httpx.get(f"{base}/afi/list", params={"path": "/"}, headers=null)
    assert read.status_code == 403 and read.json()["error"]["code"] == "forbidden"
    write = httpx.put(f"{base}/afi/write", params={"path": "/facts/null-origin.md"}, content=b"x", headers=null)
    assert write.status_code == 403
    assert httpx.get(f"{base}/afi/stat", params={"path": "/facts/null-origin.md"}).status_code == 404
    mcp = httpx.post(
        f"{base}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={**null, "Accept": "application/json, text/event-stream", "X-Mcp-Stateless": "true"},
    )
    assert mcp.status_code == 403 and mcp.json()["error"]["data"]["code"] == "forbidden"


def test_the_mcp_endpoint_refuses_a_null_origin_even_with_a_key(afi_server: AfiServer) -> None:
    headers = {
        "Origin": "null",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {afi_server.tokens['writer']}",
    }
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    response = httpx.post(afi_server.url + "/mcp", json=initialize, headers=headers)
    assert response.status_code == 403 and response.json()["error"]["data"]["code"] == "forbidden"


def test_the_keyless_owner_is_served_only_on_loopback(tmp_path: Path) -> None:
    door = Door(MemoryProvider(tmp_path / "a.db", tmp_path / "files"))
    assert door.admit(authorization=None, host="127.0.0.1:8765").principal == "local"
    with pytest.raises(Forbidden, match="only to this machine"):
        door.admit(authorization=None, address="192.0.2.7", host="127.0.0.1:8765")
    with pytest.raises(Forbidden, match="only to this machine"):
        door.admit(authorization=None, address="::ffff:192.0.2.7", host="127.0.0.1:8765")
    mapped = door.admit(authorization=None, address="::ffff:127.0.0.1", host="[::ffff:127.0.0.1]:8765")
    assert mapped.principal == "local", "a server on '::' sees IPv4 loopback peers as IPv4-mapped addresses"
    with pytest.raises(Forbidden, match="loopback"):
        door.admit(authorization=None, host="rebound.evil.example:8765")
    with pytest.raises(Forbidden, match="Origin"):
        door.admit(authorization=None, host="127.0.0.1:8765", origin="https://evil.example")
    with pytest.raises(InvalidPath, match="query string"):
        door.admit(authorization=None, query_keys=["token"])
    assert door.admit(authorization=None, host="localhost", url_space="team").space == "team"


def test_a_key_is_refused_at_another_space_url(tmp_path: Path) -> None:
    from afi.auth.keys import KeyStore

    provider = MemoryProvider(tmp_path / "a.db", tmp_path / "files")
    _, token = KeyStore(provider.db).create(space="default", scopes=("afi:read",))
    door = Door(provider)
    assert door.admit(authorization=f"Bearer {token}", host="evil.example").space == "default"
    with pytest.raises(InvalidToken):
        door.admit(authorization=f"Bearer {token}", url_space="team")


def test_a_web_page_cannot_use_a_keyless_server(open_server: AfiServer) -> None:
    base = open_server.url
    ok = httpx.get(f"{base}/afi/list", params={"path": "/"})
    assert ok.status_code == 200
    rebound = httpx.get(f"{base}/afi/list", params={"path": "/"}, headers={"Host": "evil.example"})
    assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "forbidden"
    page = httpx.put(
        f"{base}/afi/write",
        params={"path": "/facts/pwned.md"},
        content=b"x",
        headers={"Origin": "https://evil.example"},
    )
    assert page.status_code == 403
    assert httpx.get(f"{base}/afi/stat", params={"path": "/facts/pwned.md"}).status_code == 404
    mcp = httpx.post(
        f"{base}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Host": "evil.example", "Accept": "application/json, text/event-stream"},
    )
    assert mcp.status_code == 403
