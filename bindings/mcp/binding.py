"""The MCP binding (docs/afi.md, "MCP"): ``afi.*`` tools, the manifest and files as resources.

:class:`McpBinding` builds one low-level ``mcp`` :class:`~mcp.server.lowlevel.Server` over a provider.
Every tool call is parse, one call in a worker thread, render: a result carries the structured
object and its text; an :class:`~afi.errors.AfiError` becomes a tool error whose text is the error
JSON ``{code, message, path?}``. Which caller asks, in which mode, and in which session comes from
the transport (:mod:`afi.bindings.mcp.http` for Streamable HTTP, :func:`stdio_info` for stdio).

- Tool names: dotted (``afi.stat``), underscored (``afi_stat``) or both (the default).
- A stateful session also gets the fabric's five ``memory.*`` tools, attached to that session only;
  a caller without one (the 2026 revision, stateless HTTP) gets them with an optional ``session``
  argument naming the ledger session each call runs in (``FabricSessions.sessionless``). The binding
  keeps a :class:`LiveSession` per session exactly as long as the SDK's session (see
  :meth:`McpBinding.live_session`).
- Discovery mode answers three meta-tools instead (``search_tools``, ``get_tool_schema``, ``call_tool``).
- Write tools called with an idempotency key replay their stored result (:mod:`afi.auth.receipts`).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import jsonschema
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from afi.auth.receipts import Claim, ReceiptStore, no_key
from afi.errors import AfiError, Forbidden, NotFound, Unsupported
from afi.manifest import VERBS
from afi.provider import Caller, Provider

from ..offload import guarded, offload, search_lane
from .check import QuickCheck, quick_check
from .discovery import CALL_TOOL, discovery_tools
from .explain import bad_arguments
from .resources import PAGE_SIZE, list_resources, list_templates, mcp_error, read_resource
from .results import error_result, exposed_names, mcp_tool, success_result
from .sessions import SCOPE_KEY, FabricSessions, LiveSession, RequestInfo, ToolNames, connection_of, stdio_info
from .tools import ToolOutput, ToolSpec, afi_tools

__all__ = ["IDEMPOTENCY_META", "FabricSessions", "LiveSession", "McpBinding", "RequestInfo", "ToolNames", "stdio_info"]

IDEMPOTENCY_META = "idempotencyKey"
_TRACKED = "afi.session"  # set in a connection's state once its end is wired to end_session
INSTRUCTIONS = (
    "An agent's memory as a filesystem (AFI). Notes: /facts/<name>.md, /procedures/<name>.md, "
    "/working/<block>.md; real files under /files; every version under /history. Read with afi.read, "
    "find with afi.search (exact, regex or semantic), remember by writing a note path with afi.write, "
    "forget with afi.delete. Errors are JSON {code, message, path?}."
)


class McpBinding:
    """The MCP server over a provider.

    Args:
        provider: the AFI provider every ``afi.*`` tool calls.
        tool_names: offer tools dotted, underscored or both.
        receipts: the idempotency store; without it, keys are ignored (``stored: false``).
        fabric: the fabric's ``memory.*`` tools, of each stateful session and of callers without one;
            None offers none.
        default_info: the RequestInfo of a transport with no HTTP request (stdio).
        inline_reads: run tools that only read on the event loop, not in a worker thread: faster
            per call, but a slow read holds up the session's other calls (stdio's one client).
        resource_page: how many resources a ``resources/list`` page holds at most.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        tool_names: ToolNames = "both",
        receipts: ReceiptStore | None = None,
        fabric: FabricSessions | None = None,
        default_info: RequestInfo | None = None,
        version: str = "0.1.0",
        inline_reads: bool = False,
        resource_page: int = PAGE_SIZE,
    ) -> None:
        if tool_names not in ("dotted", "underscore", "both"):
            raise ValueError(f"tool_names must be dotted, underscore or both, not {tool_names!r}")
        self.provider = provider
        self.tool_names: ToolNames = tool_names
        self.receipts = receipts
        self.fabric = fabric
        self.default_info = default_info
        self.inline_reads = inline_reads
        self.resource_page = resource_page
        self.afi = afi_tools(provider)
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        self._quick: dict[str, QuickCheck | None] = {}
        # The live sessions: opened when the SDK opens one, dropped when its connection ends.
        self._sessions: dict[str, LiveSession] = {}
        self._lock = threading.Lock()
        if default_info is not None and default_info.session_id is not None:
            # stdio: the process is the session; its owner ends it (afi mcp does, when stdin closes).
            self._sessions[default_info.session_id] = LiveSession(default_info.caller, default_info.mode)
        self.meta = discovery_tools({})
        self._afi_names = {name: spec for spec in self.afi for name in exposed_names(spec.name, tool_names)}
        # Every name ever offered, by its input schema (the same for every caller offered it).
        self._schemas = {name: spec.input_schema for name, spec in self._afi_names.items()}
        self._schemas.update((spec.name, spec.input_schema) for spec in self.meta)
        # The memory.* tools of a caller without an MCP session: the same for every such caller.
        self._sessionless = fabric.sessionless() if fabric is not None else []
        self._sessionless_ids = {id(spec) for spec in self._sessionless}  # they live as long as the binding
        for spec in self._sessionless:
            self._schemas.update((name, spec.input_schema) for name in exposed_names(spec.name, tool_names))
        self.server: Server[Any] = Server(
            "afi-memory",
            version=version,
            title="afi-memory",
            instructions=INSTRUCTIONS,
            get_tool_input_schema=self.input_schema,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_read_resource=self._read_resource,
        )
        # No OpenTelemetry span per message (nothing here exports them); only the session tracker.
        self.server.middleware = [self._track_session]

    # -- who asks ----------------------------------------------------------------------------

    def info(self, ctx: ServerRequestContext[Any, Any]) -> RequestInfo:
        """Given a request context, return the RequestInfo its transport attached."""
        request = ctx.request
        if request is not None:
            found = request.scope.get(SCOPE_KEY)
            if isinstance(found, RequestInfo):
                # The session is the SDK's connection, not the header: a 2026-era request (one
                # connection per request) has none whatever header it carries.
                session_id = connection_of(ctx).session_id
                return found if found.session_id == session_id else replace(found, session_id=session_id)
        if self.default_info is not None:
            return self.default_info
        raise MCPError(types.INTERNAL_ERROR, "the transport attached no caller to this request")

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """Given a tool name, return its input schema (None: never offered here).

        The SDK checks ``Mcp-Param-*`` headers of a 2026 Streamable HTTP call against it; without
        this lookup it would run a whole ``tools/list`` before every call.
        """
        return self._schemas.get(name)

    # -- sessions ----------------------------------------------------------------------------

    async def _track_session(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Server middleware: when the SDK opens a session (a successful initialize), open ours with it."""
        result = await call_next(ctx)
        if ctx.method == "initialize":
            self._open_session(ctx)
        return result

    def _open_session(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Record the session the SDK just opened, and end it when the SDK's connection for it ends.

        The SDK runs one connection per stateful HTTP session and unwinds its ``exit_stack`` however
        the session ends: DELETE, its idle timeout, a crash, or the session manager shutting down.
        Tying :meth:`end_session` to it keeps this record exactly as long as the SDK's session, with
        no clock of our own. A connection without a session id (stdio, stateless, the 2026 era) opens
        nothing here.
        """
        connection, request = connection_of(ctx), ctx.request
        session_id = connection.session_id
        if session_id is None or request is None or connection.state.get(_TRACKED):
            return
        found = request.scope.get(SCOPE_KEY)
        if not isinstance(found, RequestInfo):
            return
        connection.state[_TRACKED] = True
        with self._lock:
            self._sessions[session_id] = LiveSession(found.caller, found.mode)
        connection.exit_stack.callback(self.end_session, session_id)

    def live_session(self, session_id: str) -> LiveSession | None:
        """Given a session id, return the live session (None: the SDK holds no such session)."""
        return self._sessions.get(session_id)

    def session_tools(self, info: RequestInfo) -> list[ToolSpec]:
        """Return the ``memory.*`` tools of the caller's live session (none without one).

        The fabric is attached on first use, only to a session that is live: an id the SDK does not
        hold (any more) gets nothing, so nothing can be attached that no end of session would free.
        """
        if self.fabric is None or info.session_id is None:
            return []
        live = self._sessions.get(info.session_id)
        if live is None:
            return []
        if live.tools is not None:
            return live.tools
        with self._lock:
            if self._sessions.get(info.session_id) is not live:
                return []  # it ended meanwhile
            if live.tools is None:
                live.tools = self.fabric.open(info.caller, info.session_id)
                for spec in live.tools:
                    for name in exposed_names(spec.name, self.tool_names):
                        self._schemas.setdefault(name, spec.input_schema)
            return live.tools

    def end_session(self, session_id: str) -> None:
        """Forget a session that ended and detach its fabric (harmless when it is not live)."""
        with self._lock:  # after an attach in progress, which then sees the session gone
            live = self._sessions.pop(session_id, None)
        if live is not None and self.fabric is not None:
            self.fabric.close(session_id)

    def catalogue(self, info: RequestInfo) -> dict[str, ToolSpec]:
        """Return every tool this caller's session may use, by each name it is offered under."""
        session = self.session_tools(info) if info.session_id is not None else self._sessionless
        if not session:
            return self._afi_names
        tools = dict(self._afi_names)
        for spec in session:
            for name in exposed_names(spec.name, self.tool_names):
                tools[name] = spec
        return tools

    async def _catalogue(self, info: RequestInfo) -> dict[str, ToolSpec]:
        # Only opening a session's fabric touches the store; everything else is a dict lookup.
        live = self._sessions.get(info.session_id) if info.session_id is not None else None
        if self.fabric is None or live is None or live.tools is not None:
            return self.catalogue(info)
        return await offload(self.catalogue, info)

    # -- handlers ----------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        info = self.info(ctx)
        if info.mode == "discovery":
            return types.ListToolsResult(tools=[mcp_tool(spec, spec.name) for spec in self.meta])
        tools = await self._catalogue(info)
        return types.ListToolsResult(tools=[mcp_tool(spec, name) for name, spec in tools.items()])

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        info = self.info(ctx)
        meta = dict(params.meta or {})
        arguments = dict(params.arguments or {})
        if info.mode == "discovery":
            return await self._discovery(info, params.name, arguments, meta)
        return await self._call(info, params.name, arguments, meta)

    async def _discovery(
        self, info: RequestInfo, name: str, arguments: dict[str, Any], meta: dict[str, Any]
    ) -> types.CallToolResult:
        try:
            catalogue = await self._catalogue(info)
        except AfiError as err:
            return error_result(err)
        specs = {spec.name: spec for spec in discovery_tools(catalogue)}
        spec = specs.get(name)
        if spec is None:
            names = ", ".join(specs)
            return error_result(NotFound(f"discovery mode offers {names}, not {name!r}; call_tool runs the others"))
        if name != CALL_TOOL:
            return await self._run(info, spec, arguments, meta)
        try:
            self._validate(spec, arguments)
        except AfiError as err:
            return error_result(err)
        return await self._call(info, arguments["name"], dict(arguments.get("arguments") or {}), meta)

    async def _call(
        self, info: RequestInfo, name: str, arguments: dict[str, Any], meta: dict[str, Any]
    ) -> types.CallToolResult:
        """Resolve ``name`` in the caller's catalogue and run it (shared by tools/call and call_tool)."""
        try:
            tools = await self._catalogue(info)
        except AfiError as err:
            return error_result(err)
        spec = tools.get(name)
        if spec is None:
            return error_result(self._missing(name))
        return await self._run(info, spec, arguments, meta)

    def _missing(self, name: str) -> AfiError:
        verb = name.replace("_", ".").removeprefix("afi.")
        if name.startswith(("afi.", "afi_")) and verb in VERBS:
            return Unsupported(f"{verb} is not offered: the manifest does not list it")
        if name.startswith(("memory.", "memory_")):
            if self.fabric is None:
                return Unsupported(f"{name} is not offered: this server has no memory fabric")
            return Forbidden(f"{name} is served only while this MCP session is live; open a new session")
        return NotFound(f"no tool named {name!r}; tools/list shows what this server offers")

    async def _run(
        self, info: RequestInfo, spec: ToolSpec, arguments: dict[str, Any], meta: dict[str, Any]
    ) -> types.CallToolResult:
        try:
            self._validate(spec, arguments)
            info.caller.require("afi:write" if spec.writes else "afi:read")
        except AfiError as err:
            return error_result(err)
        if not spec.writes:
            return await self._execute(spec, info.caller, arguments, None)
        key = meta.get(IDEMPOTENCY_META, info.idempotency_key)
        if key is None or self.receipts is None:
            durable = no_key() if key is None else {**no_key(), "reason": "no_receipt_store"}
            return await self._execute(spec, info.caller, arguments, durable)
        return await self._durable(info, spec, arguments, key)

    async def _durable(
        self, info: RequestInfo, spec: ToolSpec, arguments: dict[str, Any], key: Any
    ) -> types.CallToolResult:
        receipts = self.receipts
        assert receipts is not None
        try:
            claim: Claim = await offload(receipts.claim, info.caller, spec.name, key, arguments)
        except AfiError as err:
            return error_result(err)
        if claim.action == "replay":
            stored = claim.result or {}
            output = ToolOutput(stored.get("structured", {}), str(stored.get("text", "")))
            return success_result(output, claim.describe(status="completed", stored=True))
        try:
            lane = search_lane() if spec.searches else None
            output = await offload(spec.call, info.caller, arguments, limiter=lane)
        except AfiError as err:
            finished, _ = await offload(receipts.finish, claim, result=None, failed=True)
            result = error_result(err)
            result.meta = {"durableExecution": finished.describe(status="failed", stored=False)}
            return result
        record = {"structured": output.structured, "text": output.text}
        finished, saved = await offload(receipts.finish, claim, result=record, failed=False)
        return success_result(output, finished.describe(status="completed", stored=saved))

    async def _execute(
        self, spec: ToolSpec, caller: Caller, arguments: dict[str, Any], durable: dict[str, Any] | None
    ) -> types.CallToolResult:
        try:
            if self.inline_reads and not spec.writes:
                output = guarded(spec.call, caller, arguments)
            else:
                lane = search_lane() if spec.searches else None
                output = await offload(spec.call, caller, arguments, limiter=lane)
        except AfiError as err:
            return error_result(err)
        return success_result(output, durable)

    def _validate(self, spec: ToolSpec, arguments: dict[str, Any]) -> None:
        # A session-less memory.* tool has a schema of its own (its ``session``) under the same name.
        key = spec.name + ("+session" if id(spec) in self._sessionless_ids else "")
        if key not in self._quick:
            self._quick[key] = quick_check(spec.input_schema)
        quick = self._quick[key]
        if quick is not None and quick(arguments):
            return
        validator = self._validators.get(key)
        if validator is None:
            validator = jsonschema.Draft202012Validator(spec.input_schema)
            self._validators[key] = validator
        refused = bad_arguments(spec.name, validator, arguments)
        if refused is not None:
            raise refused

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        caller = self.info(ctx).caller
        cursor = params.cursor if params is not None else None
        try:
            return await offload(list_resources, self.provider, caller, cursor, self.resource_page)
        except AfiError as err:
            raise mcp_error(err) from None

    async def _list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return list_templates()

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        caller = self.info(ctx).caller
        return await read_resource(self.provider, caller, params.uri)
