"""Streamable HTTP for the MCP binding, at ``/mcp`` (and ``/mcp/``, ``/spaces/<space>/mcp``) of the HTTP app.

:class:`McpHttp` is the door in front of the SDK's session managers: it validates Origin, takes the
API key (``Authorization: Bearer``, the same keys and scopes as the HTTP binding), applies the rate
limit, picks stateful or stateless (``--mcp-stateless``, ``X-Mcp-Stateless: true`` or
``?stateless=1``) and the mode (``?mode=discovery``), then hands the request on with a
:class:`~afi.bindings.mcp.RequestInfo` in the ASGI scope. A stateful session stays bound to the
principal that opened it, and lives as long as the SDK's session: the binding opens and ends it
with the SDK's (:meth:`~afi.bindings.mcp.McpBinding.live_session`); this door keeps no session
table of its own. Refusals are JSON-RPC error bodies whose ``data`` is the AfiError; a
missing or bad key is 401 with ``WWW-Authenticate`` naming the resource metadata and the scopes.
:func:`mount_mcp` adds it to the HTTP binding's app (one process, one lifespan).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import anyio.to_thread
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.datastructures import Headers, QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from afi.auth.door import Door, InvalidToken, is_loopback_origin, one_header
from afi.auth.oauth.paths import MCP_ENDPOINT_PATHS, MCP_METADATA_PATHS, METADATA_PATH
from afi.auth.oauth.resource import advertised_scopes, named_servers
from afi.auth.ratelimit import RateLimiter
from afi.errors import HTTP_STATUS, AfiError, Forbidden, Internal, TooLarge, Unauthorized, Unsupported
from afi.provider import SCOPES, Caller

from .binding import McpBinding
from .sessions import SCOPE_KEY, Mode, RequestInfo

__all__ = ["METADATA_PATH", "McpHttp", "mount_mcp"]

SESSION_HEADER = "mcp-session-id"
IDEMPOTENCY_HEADER = "x-mcp-idempotency-key"
STATELESS_HEADER = "x-mcp-stateless"
DEFAULT_IDLE_SECONDS = 30 * 60
METHODS = ("GET", "POST", "DELETE")  # what Streamable HTTP uses; the SDK's own 405 has no AFI error
_TRUE = ("1", "true", "yes", "on")


_InvalidToken = InvalidToken


def _rpc_error(err: AfiError, headers: dict[str, str] | None = None) -> Response:
    """Given an AfiError, return a JSON-RPC error body with its HTTP status: the message in words,
    ``data`` the AfiError object (not its JSON again inside the message string)."""
    body = err.to_dict()
    extra = dict(headers or {})
    if err.retry_after is not None:
        extra["Retry-After"] = str(max(1, round(err.retry_after + 0.499)))
    payload = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": err.message, "data": body}}
    return JSONResponse(payload, status_code=HTTP_STATUS.get(err.code, 500), headers=extra)


async def _body_within(receive: Receive, headers: Headers, limit: int) -> Receive:
    """Read a request body of at most ``limit`` bytes; return a ``receive`` that hands it on unchanged.

    The SDK refuses a larger body too, but with a bare text 413; refused here, the answer is the AFI error.

    Raises:
        TooLarge: the body, as declared or as sent, is over ``limit`` bytes.
    """
    refusal = TooLarge(f"an MCP request body is at most {limit} bytes")
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise refusal
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if size > limit:
            raise refusal
        if not message.get("more_body", False):
            break

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return replay


class McpHttp:
    """The MCP Streamable HTTP endpoint over a binding.

    Args:
        binding: the MCP binding (its server and its fabric sessions).
        stateless: serve every request without a session (clients that keep none).
        rate_limit: the limiter the HTTP binding uses, keyed by principal (address on refused keys).
        allowed_origins: origins allowed besides loopback ones and the server's own.
        allowed_spaces: when given, only these spaces are served (another is 401 ``invalid_token``).
        default_space: the space the keyless local owner works in at ``/mcp``.
        session_idle_timeout: seconds without a request in flight (or an open GET stream) after which the
            SDK closes a stateful session; the binding's state for it goes with it.
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

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Run the session managers (enter once, in the app's lifespan).

        Leaving it ends every session: the SDK cancels their connections, whose teardown ends the
        binding's state for each.
        """
        async with self._stateful.run(), self._stateless.run():
            yield

    # -- the door --------------------------------------------------------------------------

    def _check_origin(self, headers: Headers) -> None:
        origin = one_header("Origin", headers.getlist("origin"))
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
            host=headers.getlist("host"),
            origin=headers.getlist("origin"),
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
            if scope["method"] not in METHODS:
                raise Unsupported(f"{scope['method']} is not allowed on the MCP endpoint (use {', '.join(METHODS)})")
            self._check_origin(headers)
            caller = await anyio.to_thread.run_sync(self._caller, scope, headers, space)
            info, manager = self._route(scope, headers, caller)
            if scope["method"] == "POST":
                receive = await _body_within(receive, headers, manager.max_request_body_size)
        except AfiError as err:
            extra = {}
            if isinstance(err, Unauthorized):
                extra["WWW-Authenticate"] = self._challenge(scope, headers, err, space)
            if isinstance(err, Unsupported):
                extra["Allow"] = ", ".join(METHODS)
            await _rpc_error(err, extra)(scope, receive, send)
            return
        except Exception as err:  # the key store failed: say so as an AFI error, not a bare 500
            await _rpc_error(Internal(f"authentication failed: {type(err).__name__}"))(scope, receive, send)
            return
        scope[SCOPE_KEY] = info
        await manager.handle_request(scope, receive, send)

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
            return RequestInfo(caller, mode, None, key), self._stateful
        live = self.binding.live_session(session_id)
        if live is None or (live.caller.principal, live.caller.space) != (caller.principal, caller.space):
            raise _SessionNotFound("no such session for this key: initialize a new one")
        return RequestInfo(caller, live.mode, session_id, key), self._stateful

    # -- metadata ----------------------------------------------------------------------------

    async def metadata(self, request: Request) -> Response:
        """RFC 9728 protected-resource metadata for ``/mcp``: the resource and how to present a key."""
        space = request.path_params.get("space")
        base = str(request.base_url).rstrip("/")
        resource = base + (f"/spaces/{space}" if space else "") + "/mcp"
        body = {
            "resource": resource,
            "resource_name": "afi-memory (MCP)",
            "scopes_supported": advertised_scopes(request.app),
            "bearer_methods_supported": ["header"],
            **named_servers(request.app, base),
        }
        return JSONResponse(body)


class _SessionNotFound(AfiError):
    """A session id that is not live, or belongs to another key: 404, the same answer for both.

    404 is what the MCP spec gives a session id the server does not hold, and what tells a client
    to initialize a new session. Another key's session gets the same answer (not 403) so that a key
    cannot learn which session ids exist; for that key the session indeed does not exist. The SDK
    answers its own owner check the same way. Nothing is attached, nothing reaches the SDK.
    """

    code = "not_found"


def mount_mcp(app: Starlette, mcp: McpHttp) -> None:
    """Serve ``mcp`` at ``/mcp``, ``/mcp/`` and ``/spaces/{space}/mcp`` of ``app``, run by its lifespan."""
    routes = [Route(path, endpoint=mcp) for path in MCP_ENDPOINT_PATHS]
    routes += [Route(path, endpoint=mcp.metadata, methods=["GET"]) for path in MCP_METADATA_PATHS]
    app.router.routes[0:0] = routes
    inner: Callable[[Any], AbstractAsyncContextManager[Any]] = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(target: Any) -> AsyncIterator[Any]:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(mcp.run())
            state = await stack.enter_async_context(inner(target))
            yield state

    app.router.lifespan_context = lifespan
