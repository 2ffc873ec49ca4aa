"""Where the memory provider meets the MCP binding, and ``afi mcp`` over stdio.

:func:`memory_fabric_sessions` attaches a fabric of the caller's space to each MCP session (one MCP
session = one attached fabric session), :func:`mcp_binding` builds the binding with its receipts in
the store file, :func:`mcp_http` the Streamable HTTP endpoint ``afi serve`` mounts at ``/mcp``, and
:func:`open_mcp_stdio` the stdio server of ``afi mcp``.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

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
from afi.providers.memory.fabric.fabric import create_memory_fabric
from afi.providers.memory.fabric.tools import create_fabric_tools
from afi.providers.memory.provider import MemoryProvider

from .local import local_owner, open_provider

__all__ = ["McpStdio", "mcp_binding", "mcp_http", "memory_fabric_sessions", "open_mcp_stdio"]


@dataclass
class _McpSession:
    """What the fabric's attach gate needs of a session: an id, and entries (an MCP session keeps none)."""

    id: str
    opened: list[Any] = field(default_factory=list)

    def entries(self) -> list[dict[str, Any]]:
        return []


class _FabricSessions:
    """One fabric per MCP session, over the caller's space, attached to that session alone."""

    def __init__(self, provider: MemoryProvider) -> None:
        self.provider = provider
        self._attached: dict[str, Any] = {}
        self._lock = threading.Lock()

    def open(self, caller: Caller, session_id: str) -> list[ToolSpec]:
        # A fabric of its own per session, so attaching one session never detaches another.
        memory = self.provider.fabric(caller.space).memory
        fabric = create_memory_fabric(memory)
        session = _McpSession(session_id)
        attachment = fabric.attach(session)
        with self._lock:
            self._attached[session_id] = attachment
        specs = []
        for tool in create_fabric_tools(fabric, root=self.provider.root, space=caller.space):

            def call(who: Caller, args: dict[str, Any], run: Any = tool.run) -> ToolOutput:
                data = run(session, args)
                return ToolOutput(data, json.dumps(data, ensure_ascii=False))

            read_only = tool.kind in ("read", "search")
            specs.append(
                ToolSpec(
                    name=tool.name,
                    description=tool.description,
                    input_schema=tool.input_schema,
                    output_schema=None,
                    read_only=read_only,
                    destructive=tool.kind == "delete",
                    idempotent=read_only or tool.kind == "delete",
                    call=call,
                )
            )
        return specs

    def close(self, session_id: str) -> None:
        with self._lock:
            attachment = self._attached.pop(session_id, None)
        if attachment is not None:
            attachment.detach()


def memory_fabric_sessions(provider: MemoryProvider) -> FabricSessions:
    """Given the memory provider, return what attaches a fabric to each MCP session."""
    return _FabricSessions(provider)


def mcp_binding(provider: MemoryProvider, db: Path, *, tool_names: ToolNames = "both", **kw: Any) -> McpBinding:
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
    db: Path,
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
    db: Path, root: Path, *, space: str | None, tool_names: ToolNames = "both", discovery: bool = False
) -> McpStdio:
    """Open the store and the MCP binding for one stdio client.

    With ``AFI_TOKEN`` set, calls are made as that API key; without it, as the local owner of ``space``.
    """
    provider = open_provider(db, root)
    token = os.environ.get("AFI_TOKEN") or None
    caller = provider.authenticate(token) if token else local_owner(space or "default")
    session_id = f"stdio-{os.getpid()}"
    info = stdio_info(caller, "discovery" if discovery else "tools", session_id)
    # One client: a read run on the event loop saves a thread hop per call and holds up no one else.
    binding = mcp_binding(provider, db, tool_names=tool_names, default_info=info, inline_reads=True)
    return McpStdio(binding, session_id)
