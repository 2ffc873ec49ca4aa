"""Streamable HTTP for the MCP binding, at ``/mcp`` (and ``/mcp/``, ``/spaces/<space>/mcp``) of the HTTP app.

:class:`McpHttp` is the door in front of the SDK's session managers: it validates Origin, takes the
API key (``Authorization: Bearer``, the same keys and scopes as the HTTP binding), applies the rate
limit, picks stateful or stateless (``--mcp-stateless``, ``X-Mcp-Stateless: true`` or
``?stateless=1``) and the mode (``?mode=discovery``), then hands the request on with a
:class:`~afi.bindings.mcp.RequestInfo` in the ASGI scope. A stateful session stays bound to the
principal that opened it. Refusals are JSON-RPC error bodies whose ``data`` is the AfiError; a
missing or bad key is 401 with ``WWW-Authenticate`` naming the resource metadata and the scopes.
:func:`mount_mcp` adds it to the HTTP binding's app (one process, one lifespan).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.datastructures import Headers, QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from afi.door import Door, InvalidToken, is_loopback_origin
from afi.errors import HTTP_STATUS, AfiError, Forbidden, Internal, Unauthorized
from afi.provider import SCOPES, Caller
from afi.ratelimit import RateLimiter

from .mcp import SCOPE_KEY, McpBinding, Mode, RequestInfo

__all__ = ["METADATA_PATH", "McpHttp", "mount_mcp"]

METADATA_PATH = "/.well-known/oauth-protected-resource"
SESSION_HEADER = "mcp-session-id"
IDEMPOTENCY_HEADER = "x-mcp-idempotency-key"
STATELESS_HEADER = "x-mcp-stateless"
DEFAULT_IDLE_SECONDS = 30 * 60
_TRUE = ("1", "true", "yes", "on")


_InvalidToken = InvalidToken


@dataclass
class _Session:
    principal: str
    space: str
    mode: Mode
    seen: float


def _rpc_error(err: AfiError, headers: dict[str, str] | None = None) -> Response:
    """Given an AfiError, return a JSON-RPC error body (``data`` is the AfiError) with its HTTP status."""
    body = err.to_dict()
    extra = dict(headers or {})
    if err.retry_after is not None:
        extra["Retry-After"] = str(max(1, round(err.retry_after + 0.499)))
    payload = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": json.dumps(body), "data": body}}
    return JSONResponse(payload, status_code=HTTP_STATUS.get(err.code, 500), headers=extra)


class McpHttp:
    """The MCP Streamable HTTP endpoint over a binding.

    Args:
        binding: the MCP binding (its server and its fabric sessions).
        stateless: serve every request without a session (clients that keep none).
        rate_limit: the limiter the HTTP binding uses, keyed by principal (address on refused keys).
        allowed_origins: origins allowed besides loopback ones and the server's own.
        allowed_spaces: when given, only these spaces are served (another is 401 ``invalid_token``).
        default_space: the space the keyless local owner works in at ``/mcp``.
        session_idle_timeout: seconds after which an unused stateful session is closed.
    """

    def __init__(
        self,
        binding: McpBinding,
        *,
        stateless: bool = False,
        rate_limit: RateLimiter | None = None,
        allowed_origins: Iterable[str] = (),
        allowed_spaces: Iterable[str] | None = None,
        default_space: str | None = None,
        session_idle_timeout: float = DEFAULT_IDLE_SECONDS,
    ) -> None:
        self.binding = binding
        self.stateless = stateless
        self.rate_limit = rate_limit
        self.allowed_origins = frozenset(o.rstrip("/") for o in allowed_origins)
        self.allowed_spaces = frozenset(allowed_spaces) if allowed_spaces is not None else None
        self.default_space = default_space
        self._door = Door(binding.provider, rate_limit, self.allowed_spaces, default_space)
        self.idle = session_idle_timeout
        server = binding.server
        self._stateful = StreamableHTTPSessionManager(server, json_response=True, session_idle_timeout=self.idle)
        self._stateless = StreamableHTTPSessionManager(server, json_response=True, stateless=True)
        self._sessions: dict[str, _Session] = {}

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Run the session managers (enter once, in the app's lifespan)."""
        try:
            async with self._stateful.run(), self._stateless.run():
                yield
        finally:
            for session_id in list(self._sessions):
                self._end(session_id)

    # -- the door --------------------------------------------------------------------------

    def _check_origin(self, headers: Headers) -> None:
        origin = headers.get("origin")
        if origin is None:
            return
        own = {f"http://{headers.get('host', '')}", f"https://{headers.get('host', '')}"}
        if origin.rstrip("/") in self.allowed_origins or origin in own or is_loopback_origin(origin):
            return
        raise Forbidden(f"the Origin {origin!r} is not allowed to use this MCP endpoint")

    def _caller(self, scope: Scope, headers: Headers, space: str | None) -> Caller:
        """Given the request, return who asks (runs in a worker thread: the key store is SQLite)."""
        client = scope.get("client")
        return self._door.admit(
            authorization=headers.get("authorization"),
            query_keys=QueryParams(scope.get("query_string", b"")).keys(),
            address=client[0] if client else "unknown",
            url_space=space,
            host=headers.get("host"),
            origin=headers.get("origin"),
        )

    def _challenge(self, scope: Scope, headers: Headers, err: AfiError, space: str | None) -> str:
        base = f"{scope.get('scheme', 'http')}://{headers.get('host', 'localhost')}"
        resource = (f"/spaces/{space}" if space else "") + "/mcp"
        parts = ["Bearer"]
        if headers.get("authorization") is not None or isinstance(err, _InvalidToken):
            parts.append('error="invalid_token",')
        parts.append(f'resource_metadata="{base}{METADATA_PATH}{resource}", scope="{" ".join(SCOPES[:2])}"')
        return " ".join(parts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        space = scope.get("path_params", {}).get("space")
        try:
            self._check_origin(headers)
            caller = await anyio.to_thread.run_sync(self._caller, scope, headers, space)
            info, manager = self._route(scope, headers, caller)
        except AfiError as err:
            extra = {}
            if isinstance(err, Unauthorized):
                extra["WWW-Authenticate"] = self._challenge(scope, headers, err, space)
            await _rpc_error(err, extra)(scope, receive, send)
            return
        except Exception as err:  # the key store failed: say so as an AFI error, not a bare 500
            await _rpc_error(Internal(f"authentication failed: {type(err).__name__}"))(scope, receive, send)
            return
        scope[SCOPE_KEY] = info
        if manager is self._stateless or info.session_id is not None:
            await manager.handle_request(scope, receive, send)
            if info.session_id is not None and scope.get("method") == "DELETE":
                self._end(info.session_id)
            return
        await manager.handle_request(scope, receive, self._watch_new_session(send, info))

    def _route(
        self, scope: Scope, headers: Headers, caller: Caller
    ) -> tuple[RequestInfo, StreamableHTTPSessionManager]:
        query = QueryParams(scope.get("query_string", b""))
        mode: Mode = "discovery" if query.get("mode") == "discovery" else "tools"
        key = headers.get(IDEMPOTENCY_HEADER)
        stateless = (
            self.stateless
            or headers.get(STATELESS_HEADER, "").lower() in _TRUE
            or query.get("stateless", "").lower() in _TRUE
        )
        if stateless:
            return RequestInfo(caller, mode, None, key), self._stateless
        session_id = headers.get(SESSION_HEADER)
        if session_id is None:
            self._prune()
            return RequestInfo(caller, mode, None, key), self._stateful
        known = self._sessions.get(session_id)
        if known is not None:
            if (known.principal, known.space) != (caller.principal, caller.space):
                raise _SessionNotFound("no such session for this key")
            known.seen = time.monotonic()
            mode = known.mode
        return RequestInfo(caller, mode, session_id, key), self._stateful

    def _watch_new_session(self, send: Send, info: RequestInfo) -> Callable[[Message], Awaitable[None]]:
        """Wrap ``send`` to record the session a successful initialize opened, with its principal and mode."""

        async def watching(message: Message) -> None:
            if message["type"] == "http.response.start" and message.get("status", 500) < 400:
                for name, value in message.get("headers", []):
                    if name.lower() == SESSION_HEADER.encode():
                        caller = info.caller
                        self._sessions[value.decode()] = _Session(
                            caller.principal, caller.space, info.mode, time.monotonic()
                        )
            await send(message)

        return watching

    def _prune(self) -> None:
        cutoff = time.monotonic() - self.idle
        for session_id, session in list(self._sessions.items()):
            if session.seen < cutoff:
                self._end(session_id)

    def _end(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)
        self.binding.end_session(session_id)

    # -- metadata ----------------------------------------------------------------------------

    async def metadata(self, request: Request) -> Response:
        """RFC 9728 protected-resource metadata for ``/mcp``: the resource and how to present a key."""
        space = request.path_params.get("space")
        base = str(request.base_url).rstrip("/")
        resource = base + (f"/spaces/{space}" if space else "") + "/mcp"
        body = {
            "resource": resource,
            "resource_name": "afi-memory (MCP)",
            "scopes_supported": list(SCOPES),
            "bearer_methods_supported": ["header"],
        }
        return JSONResponse(body)


class _SessionNotFound(AfiError):
    """A session id that is unknown, or belongs to another key: answered as if it did not exist."""

    code = "not_found"


def mount_mcp(app: Starlette, mcp: McpHttp) -> None:
    """Serve ``mcp`` at ``/mcp``, ``/mcp/`` and ``/spaces/{space}/mcp`` of ``app``, run by its lifespan."""
    routes = [Route(path, endpoint=mcp) for path in ("/mcp", "/mcp/", "/spaces/{space}/mcp", "/spaces/{space}/mcp/")]
    routes += [
        Route(METADATA_PATH + "/mcp", endpoint=mcp.metadata, methods=["GET"]),
        Route(METADATA_PATH + "/spaces/{space}/mcp", endpoint=mcp.metadata, methods=["GET"]),
    ]
    app.router.routes[0:0] = routes
    inner: Callable[[Any], AbstractAsyncContextManager[Any]] = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(target: Any) -> AsyncIterator[Any]:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(mcp.run())
            state = await stack.enter_async_context(inner(target))
            yield state

    app.router.lifespan_context = lifespan
