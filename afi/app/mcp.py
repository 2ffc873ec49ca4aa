"""Where the memory provider meets the MCP binding, and ``afi mcp`` over stdio.

:func:`memory_fabric_sessions` hands the binding the fabric's five ``memory.*`` tools as the
provider serves them (:class:`~afi.providers.memory.tools.ToolSessions`: an attach gate per MCP
session, or per call for a caller without one, and every effect a provider verb of the MCP caller);
this module only turns them into the binding's :class:`~afi.bindings.mcp.ToolSpec`.
:func:`mcp_binding` builds the binding with its receipts in the store file, :func:`mcp_http` the
Streamable HTTP endpoint ``afi serve`` mounts at ``/mcp``, and :func:`open_mcp_stdio` the stdio server
of ``afi mcp``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from afi import config
from afi.auth.ratelimit import RateLimiter
from afi.auth.receipts import ReceiptStore
from afi.bindings.mcp import (
    FabricSessions,
    McpBinding,
    McpHttp,
    ToolNames,
    ToolOutput,
    ToolSpec,
    stdio_info,
    stdio_streams,
)
from afi.provider import Caller
from afi.providers.memory.fabric.tools import TOOLS, ToolInfo
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.tools import ToolSessions, own_session, with_session

from .local import load_embedder_in_background, local_owner, open_provider

__all__ = [
    "McpStdio",
    "mcp_binding",
    "mcp_http",
    "memory_fabric_sessions",
    "open_mcp_stdio",
    "own_session",
]


def _spec(tool: ToolInfo, schema: dict[str, Any], run: Callable[[Caller, dict[str, Any]], dict[str, Any]]) -> ToolSpec:
    """Given a tool and what runs it for a caller, return the binding's spec of it (its answer as JSON text too)."""
    read_only = tool.kind in ("read", "search")

    def call(who: Caller, args: dict[str, Any]) -> ToolOutput:
        data = run(who, args)
        return ToolOutput(data, json.dumps(data, ensure_ascii=False))

    return ToolSpec(
        name=tool.name,
        description=tool.description,
        input_schema=schema,
        output_schema=None,
        read_only=read_only,
        destructive=tool.kind == "delete",
        idempotent=read_only or tool.kind == "delete",
        call=call,
        searches=tool.kind == "search",
    )


@dataclass(frozen=True)
class _FabricSessions:
    """The binding's view of the provider's tool sessions: one spec per tool, calling one method."""

    tools: ToolSessions

    def open(self, caller: Caller, session_id: str) -> list[ToolSpec]:
        self.tools.open(caller, session_id)
        return [_spec(tool, tool.input_schema, partial(self.tools.call, session_id, tool.name)) for tool in TOOLS]

    def sessionless(self) -> list[ToolSpec]:
        return [_spec(t, with_session(t.input_schema), partial(self.tools.call_once, t.name)) for t in TOOLS]

    def close(self, session_id: str) -> None:
        self.tools.close(session_id)


def memory_fabric_sessions(provider: MemoryProvider) -> FabricSessions:
    """Given the memory provider, return what attaches a fabric to each MCP session."""
    return _FabricSessions(ToolSessions(provider))


def mcp_binding(provider: MemoryProvider, db: Path | str, *, tool_names: ToolNames = "both", **kw: Any) -> McpBinding:
    """Given the memory provider and its store file, return the MCP binding (receipts in the same file)."""
    return McpBinding(
        provider,
        tool_names=tool_names,
        receipts=ReceiptStore(db),
        fabric=memory_fabric_sessions(provider),
        **kw,
    )


def mcp_http(
    provider: MemoryProvider,
    db: Path | str,
    *,
    tool_names: ToolNames = "both",
    stateless: bool = False,
    rate_limit: RateLimiter | None = None,
    space: str | None = None,
) -> McpHttp:
    """Return the Streamable HTTP endpoint ``afi serve`` mounts at ``/mcp``."""
    return McpHttp(
        mcp_binding(provider, db, tool_names=tool_names),
        stateless=stateless,
        rate_limit=rate_limit,
        allowed_spaces={space} if space else None,
        default_space=space,
    )


@dataclass
class McpStdio:
    """The MCP binding of one stdio client, ready to run."""

    binding: McpBinding
    session_id: str

    def run(self) -> None:
        """Serve the client on stdin/stdout until it closes them; then end its session."""

        async def serve() -> None:
            async with stdio_streams() as (read_stream, write_stream):
                server = self.binding.server
                await server.run(read_stream, write_stream, server.create_initialization_options())

        try:
            anyio.run(serve)
        finally:
            self.binding.end_session(self.session_id)


def open_mcp_stdio(
    db: Path | str, root: Path, *, space: str | None, tool_names: ToolNames = "both", discovery: bool = False
) -> McpStdio:
    """Open the store and the MCP binding for one stdio client.

    With ``AFI_TOKEN`` set, calls are made as that API key; without it, as the local owner of ``space``.
    """
    provider = open_provider(db, root)
    load_embedder_in_background(provider)
    token = config.token()
    caller = provider.authenticate(token) if token else local_owner(space or "default")
    session_id = f"stdio-{os.getpid()}"
    info = stdio_info(caller, "discovery" if discovery else "tools", session_id)
    # One client: a read run on the event loop saves a thread hop per call and holds up no one else.
    binding = mcp_binding(provider, db, tool_names=tool_names, default_info=info, inline_reads=True)
    return McpStdio(binding, session_id)
