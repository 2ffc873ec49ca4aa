"""MCP Streamable HTTP sessions live exactly as long as the SDK's: the app ``afi serve`` builds, in process.

The app (HTTP binding + ``/mcp``) runs on uvicorn on 127.0.0.1 with its lifespan, so the test can count
what the binding holds: the live sessions (``McpBinding._sessions``) and the fabric sessions attached
to them (``_FabricSessions._attached``). Requests are real HTTP (httpx) or the official SDK client.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx

from afi.app.mcp import mcp_binding
from afi.auth.keys import KeyStore
from afi.bindings.http import create_app
from afi.bindings.mcp import McpHttp, mount_mcp
from afi.providers.memory.provider import MemoryProvider
from tests.support.mcp import run, sdk
from tests.support.servers import serve_app_in_thread

VERSION = "2025-06-18"
MODERN = "2026-07-28"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
ROLES = {"writer": "afi:write", "admin": "afi:admin"}  # two keys of the same space
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class Served:
    """The in-process server: its /mcp URL, the endpoint object, and API keys by name."""

    url: str
    mcp: McpHttp
    tokens: dict[str, str] = field(default_factory=dict)
    principals: dict[str, str] = field(default_factory=dict)

    def sessions(self) -> set[str]:
        """The sessions the binding holds state for."""
        return set(self.mcp.binding._sessions)

    def attached(self) -> set[str]:
        """The sessions a fabric session is attached to."""
        fabric: Any = self.mcp.binding.fabric
        attached: set[str] = fabric.tools.attached()
        return attached

    def headers(self, token: str, session: str | None = None) -> dict[str, str]:
        sent = {**ACCEPT, "Authorization": f"Bearer {token}", "MCP-Protocol-Version": VERSION}
        if session is not None:
            sent["Mcp-Session-Id"] = session
        return sent


@contextmanager
def serve_mcp(tmp_path: Path, idle: float = 1800.0) -> Iterator[Served]:
    """Run the HTTP app with /mcp mounted (as ``afi serve`` does), with a session idle timeout of ``idle`` s."""
    db, root = tmp_path / "afi.db", tmp_path / "files"
    keys = KeyStore(db)
    made = {name: keys.create(space="default", scopes=(scope,), name=name) for name, scope in ROLES.items()}
    provider = MemoryProvider(db, root, keys=keys)
    app = create_app(provider)
    endpoint = McpHttp(mcp_binding(provider, db), session_idle_timeout=idle)
    mount_mcp(app, endpoint)
    tokens = {name: token for name, (_, token) in made.items()}
    principals = {name: record.id for name, (record, _) in made.items()}
    with serve_app_in_thread(app, lifespan="on") as base:
        yield Served(f"{base}/mcp", endpoint, tokens, principals)


def wait_for(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``check`` until it holds or ``timeout`` passes; return whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def open_session(served: Served, token: str) -> str:
    """Initialize a session with ``token`` (raw HTTP, as any client does); return its id."""
    opened = httpx.post(served.url, json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {token}"})
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    done = httpx.post(served.url, json=INITIALIZED, headers=served.headers(token, session))
    assert done.status_code == 202, done.text
    return session


def list_tools(served: Served, token: str, session: str) -> httpx.Response:
    return httpx.post(served.url, json=LIST, headers=served.headers(token, session))


def assert_not_found(response: httpx.Response) -> None:
    """A refused session: 404 with a JSON-RPC error body whose data is the AfiError ``not_found``."""
    assert response.status_code == 404, response.text[:300]
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["error"]["data"]["code"] == "not_found", body


def memory_tools(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text[:300]
    return {tool["name"] for tool in response.json()["result"]["tools"] if tool["name"].startswith("memory")}


@asynccontextmanager
async def get_stream(served: Served, token: str, session: str) -> AsyncIterator[None]:
    """Hold the session's GET (server-to-client) stream open: the SDK does not count idle time meanwhile."""
    async with httpx.AsyncClient(timeout=None) as client:
        headers = {**served.headers(token, session), "Accept": "text/event-stream"}
        async with client.stream("GET", served.url, headers=headers) as response:
            assert response.status_code == 200
            yield


def test_a_session_ended_by_delete_frees_its_fabric_session(tmp_path: Path) -> None:
    with serve_mcp(tmp_path) as served:
        token = served.tokens["writer"]
        seen: list[str] = []

        async def body() -> None:
            async with sdk(served.url, token, mode="legacy") as client:  # leaving it sends DELETE
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert "memory.insert" in names
                seen.extend(served.sessions())
                assert served.attached() == set(seen) and len(seen) == 1

        run(body)
        assert wait_for(lambda: not served.sessions() and not served.attached()), (served.sessions(), served.attached())
        assert_not_found(list_tools(served, token, seen[0]))

        session = open_session(served, token)  # the same by hand: DELETE answers 200, then the id is gone
        assert memory_tools(list_tools(served, token, session)) and served.attached() == {session}
        assert httpx.delete(served.url, headers=served.headers(token, session)).status_code == 200
        assert wait_for(lambda: not served.sessions() and not served.attached())
        assert_not_found(list_tools(served, token, session))


def test_an_idle_session_reaped_by_the_sdk_frees_its_fabric_session(tmp_path: Path) -> None:
    with serve_mcp(tmp_path, idle=0.5) as served:
        token = served.tokens["writer"]
        session = open_session(served, token)
        assert "memory.insert" in memory_tools(list_tools(served, token, session))
        assert served.sessions() == {session} and served.attached() == {session}
        # No request in flight for the idle time: the SDK ends the session, and so must the binding.
        assert wait_for(lambda: not served.sessions() and not served.attached()), (served.sessions(), served.attached())
        assert_not_found(list_tools(served, token, session))
        assert served.attached() == set()  # the refused request attached nothing


def test_an_unknown_session_id_is_404_and_attaches_nothing(tmp_path: Path) -> None:
    with serve_mcp(tmp_path) as served:
        token = served.tokens["writer"]
        made_up = "0123456789abcdef0123456789abcdef"
        assert_not_found(list_tools(served, token, made_up))
        # A 2026-era request (the SDK client's default) with a session id no one issued is refused too,
        # not served with a fabric attached under that id.
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
        modern = {**served.headers(token, made_up), "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"}
        assert_not_found(httpx.post(served.url, json={**LIST, "params": {"_meta": meta}}, headers=modern))
        assert served.sessions() == set() and served.attached() == set()


def test_another_key_is_refused_on_a_live_session(tmp_path: Path) -> None:
    with serve_mcp(tmp_path, idle=1.0) as served:
        writer, admin = served.tokens["writer"], served.tokens["admin"]
        session = open_session(served, writer)
        assert memory_tools(list_tools(served, writer, session))

        async def body() -> None:
            # An open GET stream keeps the session live past the idle time (the SDK pauses its clock).
            async with get_stream(served, writer, session):
                await anyio.sleep(1.6)
                await anyio.to_thread.run_sync(open_session, served, writer)  # another client comes along
                stolen = await anyio.to_thread.run_sync(list_tools, served, admin, session)
                assert_not_found(stolen)
                killed = await anyio.to_thread.run_sync(
                    lambda: httpx.delete(served.url, headers=served.headers(admin, session))
                )
                assert_not_found(killed)
                assert session in served.sessions() and session in served.attached()
                assert served.mcp.binding._sessions[session].caller.principal == served.principals["writer"]
                assert memory_tools(await anyio.to_thread.run_sync(list_tools, served, writer, session))

        run(body)
        # The stream closed: the session goes idle, the SDK reaps it, and the binding lets go of it.
        assert wait_for(lambda: session not in served.sessions() and session not in served.attached())


def test_a_session_held_open_past_the_idle_time_is_freed_at_shutdown(tmp_path: Path) -> None:
    with serve_mcp(tmp_path, idle=1.0) as served:
        writer = served.tokens["writer"]
        session = open_session(served, writer)
        assert memory_tools(list_tools(served, writer, session))
        binding = served.mcp.binding

        async def body() -> None:
            async with get_stream(served, writer, session):
                await anyio.sleep(1.6)
                other = await anyio.to_thread.run_sync(open_session, served, writer)
                assert memory_tools(await anyio.to_thread.run_sync(list_tools, served, writer, session))
                assert memory_tools(await anyio.to_thread.run_sync(list_tools, served, writer, other))
                assert served.attached() == {session, other}

        run(body)
    assert binding._sessions == {}
    assert set(served.attached()) == set()
