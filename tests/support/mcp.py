"""Helpers the MCP tests share: the official SDK client against a URL or a command, driven from sync tests."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult

T = TypeVar("T")

AFI = [sys.executable, "-c", "from afi.cli import main; main()"]


def afi_mcp_command(db: Path, root: Path, *args: str) -> list[str]:
    """The command line of ``afi mcp`` over a store and a root."""
    return [*AFI, "mcp", "--db", str(db), "--root", str(root), *args]


@asynccontextmanager
async def sdk(
    target: str | list[str], token: str | None = None, *, mode: str = "auto", headers: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    """The official SDK client, over Streamable HTTP (a URL) or stdio (a command line)."""
    async with AsyncExitStack() as stack:
        if isinstance(target, str):
            sent = dict(headers or {})
            if token:
                sent["Authorization"] = f"Bearer {token}"
            http = await stack.enter_async_context(create_mcp_http_client(headers=sent))
            client = Client(streamable_http_client(target, http_client=http), mode=mode, cache=None)
        else:
            params = StdioServerParameters(command=target[0], args=target[1:])
            client = Client(params, mode=mode, cache=None)
        yield await stack.enter_async_context(client)


def run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run an async test body to completion."""
    return anyio.run(fn)


def error_of(result: CallToolResult) -> dict[str, Any]:
    """Given a tool error, return the AfiError JSON its text carries (and check it is one)."""
    assert result.is_error, f"expected a tool error, got {result.structured_content!r}"
    text = result.content[0].text  # type: ignore[union-attr]
    body = json.loads(text)
    assert set(body) >= {"code", "message"}, text
    return body  # type: ignore[no-any-return]
