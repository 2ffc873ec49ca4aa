"""``afi mcp``: the MCP binding over stdio (nothing but protocol on stdout; logs go to stderr).

Also where the memory provider meets the MCP binding: :func:`memory_fabric_sessions` attaches a
fabric of the caller's space to each MCP session (one MCP session = one attached fabric session),
and :func:`mcp_http` builds the Streamable HTTP endpoint ``afi serve`` mounts at ``/mcp``.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .errors import afi_errors
from .options import DbOption, RootOption, resolve_db, resolve_root

if TYPE_CHECKING:
    from afi.bindings.mcp import FabricSessions, McpBinding, McpHttp, ToolNames, ToolSpec
    from afi.provider import Caller
    from afi.providers.memory.provider import MemoryProvider
    from afi.ratelimit import RateLimiter

__all__ = ["mcp_binding", "mcp_http", "memory_fabric_sessions", "register"]

TOOL_NAMES_HELP = "Offer tools dotted (afi.stat), underscored (afi_stat, for clients that reject dots) or both"


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
        from afi.bindings.mcp import ToolOutput, ToolSpec
        from afi.providers.memory.fabric import create_memory_fabric
        from afi.providers.memory.tools import create_fabric_tools

        # A fabric of its own per session, so attaching one session never detaches another.
        memory = self.provider.fabric(caller.space).memory
        fabric = create_memory_fabric(memory)
        session = _McpSession(session_id)
        attachment = fabric.attach(session)
        with self._lock:
            self._attached[session_id] = attachment
        specs = []
        for tool in create_fabric_tools(fabric, root=self.provider.root / caller.space):

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
    from afi.bindings.mcp import McpBinding
    from afi.receipts import ReceiptStore

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
    from afi.bindings.mcp import McpHttp

    return McpHttp(
        mcp_binding(provider, db, tool_names=tool_names),
        stateless=stateless,
        rate_limit=rate_limit,
        allowed_spaces={space} if space else None,
        default_space=space,
    )


def mcp(
    db: DbOption = None,
    root: RootOption = None,
    space: Annotated[
        str | None, typer.Option("--space", envvar="AFI_SPACE", help="Space of the keyless local owner")
    ] = None,
    tool_names: Annotated[str, typer.Option("--tool-names", help=TOOL_NAMES_HELP)] = "both",
    discovery: Annotated[
        bool, typer.Option("--discovery", help="Offer only search_tools, get_tool_schema and call_tool")
    ] = False,
) -> None:
    """Serve the memory to an MCP client over stdio (afi.* tools, memory.* tools, afi:// resources).

    With AFI_TOKEN set, calls are made as that API key; without it, as the local owner (whoever can
    run this command can read the store file anyway).
    """
    if tool_names not in ("dotted", "underscore", "both"):
        raise typer.BadParameter("use dotted, underscore or both", param_hint="--tool-names")
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    import anyio

    from afi.bindings.mcp import stdio_info, stdio_streams
    from afi.provider import Caller
    from afi.providers.memory.provider import MemoryProvider

    db_path = resolve_db(db)
    with afi_errors():
        provider = MemoryProvider(db_path, resolve_root(root))
        token = os.environ.get("AFI_TOKEN") or None
        caller = provider.authenticate(token) if token else Caller(principal="local", space=space or "default")
        session_id = f"stdio-{os.getpid()}"
        info = stdio_info(caller, "discovery" if discovery else "tools", session_id)
        # One client: a read run on the event loop saves a thread hop per call and holds up no one else.
        binding = mcp_binding(provider, db_path, tool_names=tool_names, default_info=info, inline_reads=True)

    async def serve() -> None:
        async with stdio_streams() as (read_stream, write_stream):
            await binding.server.run(read_stream, write_stream, binding.server.create_initialization_options())

    try:
        anyio.run(serve)
    finally:
        binding.end_session(session_id)


def register(app: typer.Typer) -> None:
    """Add ``afi mcp`` to ``app``."""
    app.command("mcp")(mcp)
