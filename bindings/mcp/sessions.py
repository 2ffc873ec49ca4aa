"""Who asks the MCP binding: the caller, mode and session a transport attaches to each request, the
live stateful sessions, and the SDK connection a request came on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext

from afi.provider import Caller

from .tools import ToolSpec

__all__ = [
    "SCOPE_KEY",
    "FabricSessions",
    "LiveSession",
    "Mode",
    "RequestInfo",
    "ToolNames",
    "connection_of",
    "stdio_info",
]

ToolNames = Literal["dotted", "underscore", "both"]
Mode = Literal["tools", "discovery"]
SCOPE_KEY = "afi.mcp"  # where the HTTP transport leaves the RequestInfo in the ASGI scope


@dataclass(frozen=True)
class RequestInfo:
    """Who calls, in which mode, in which stateful session (None: no session), with which header key."""

    caller: Caller
    mode: Mode = "tools"
    session_id: str | None = None
    idempotency_key: str | None = None


@dataclass
class LiveSession:
    """A stateful session the transport holds open: who opened it, in which mode, its tools once attached."""

    caller: Caller
    mode: Mode
    tools: list[ToolSpec] | None = None


def stdio_info(caller: Caller, mode: Mode = "tools", session_id: str = "stdio") -> RequestInfo:
    """Given the process's caller, return the RequestInfo of a stdio server (one process, one session)."""
    return RequestInfo(caller, mode, session_id)


class FabricSessions(Protocol):
    """Attaches the fabric to one MCP session and hands back its ``memory.*`` tools; or, for a caller
    without an MCP session (the 2026 revision, stateless HTTP), the tools that name their session."""

    def open(self, caller: Caller, session_id: str) -> list[ToolSpec]:
        """Attach a fabric session for ``session_id``; return its tools (they refuse once closed)."""
        ...

    def close(self, session_id: str) -> None:
        """Detach the session (harmless when it was never opened)."""
        ...

    def sessionless(self) -> list[ToolSpec]:
        """The ``memory.*`` tools for a caller without an MCP session: each call runs in the ledger
        session its optional ``session`` argument names, by default the caller's own."""
        ...


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection:
    """Given a request context, return the SDK connection it came on (one per stateful HTTP session).

    The only private access here: mcp 2.3's low-level context does not expose the connection yet (the
    new ``Context.connection`` does, and the SDK marks ``_make_context`` for that rework), but the
    ``ServerSession`` it hands every handler holds it. Everything used from it is public:
    ``session_id``, ``state`` and ``exit_stack`` (documented for per-connection teardown).
    """
    found = getattr(ctx, "connection", None)
    if isinstance(found, Connection):
        return found
    connection: Connection = ctx.session._connection
    return connection
