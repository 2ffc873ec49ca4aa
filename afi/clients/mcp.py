"""An :class:`~afi.clients.AfiClient` over MCP: each verb is one ``afi.*`` tool call.

It drives the official SDK client (``mcp.Client``) on an event loop in a background thread, so the
conformance kit and the CLI use it like any other synchronous client. A tool error's text is the
AfiError JSON and comes back as that AfiError; a refusal at the HTTP door (401, 403) arrives as a
JSON-RPC error whose ``data`` is the AfiError, and is raised the same way.

Examples::

    McpClient.http("http://127.0.0.1:8765/mcp", token)        # Streamable HTTP
    McpClient.stdio(["afi", "mcp", "--db", "afi.db"])          # a subprocess over stdio
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Literal

import anyio.from_thread
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from ..errors import ERROR_CODES, AfiError, Internal, error_from_dict
from ..model import DeleteResult, Entry, Manifest, MatchPage, Page, ReadResult, SearchQuery, SearchRequest
from .base import search_body

__all__ = ["McpClient"]

Style = Literal["dotted", "underscore"]


def _afi_error(err: MCPError) -> AfiError:
    """Given an MCP protocol error, return the AfiError it carries (or ``internal`` naming it)."""
    data = err.data
    if isinstance(data, dict) and data.get("code") in ERROR_CODES:
        return error_from_dict(data)
    return Internal(f"MCP error {err.code}: {err.message}")


def _first_mcp_error(group: BaseExceptionGroup[Any]) -> MCPError | None:
    for inner in group.exceptions:
        if isinstance(inner, MCPError):
            return inner
        if isinstance(inner, BaseExceptionGroup):
            found = _first_mcp_error(inner)
            if found is not None:
                return found
    return None


def _tool_error(text: str) -> AfiError:
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("code") in ERROR_CODES:
        return error_from_dict(body)
    return Internal(f"the tool failed without an AFI error: {text[:200]}")


class McpClient:
    """An AfiClient whose verbs are MCP tool calls.

    Args:
        target: a Streamable HTTP URL (``…/mcp``) or the parameters of a stdio server.
        token: the API key, sent as ``Authorization: Bearer`` (HTTP only).
        mode: the SDK's era negotiation: ``auto`` (the default) or ``legacy`` (initialize handshake).
        style: call ``afi.stat`` (dotted) or ``afi_stat`` (underscore).
        headers: extra HTTP headers (e.g. ``X-Mcp-Stateless``).
    """

    def __init__(
        self,
        target: str | StdioServerParameters,
        token: str | None = None,
        *,
        mode: str = "auto",
        style: Style = "dotted",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.target = target
        self.token = token
        self.mode = mode
        self.style = style
        self.headers = dict(headers or {})
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self._portal_cm: Any = anyio.from_thread.start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._session_cm: Any = None
        self.client: Client | None = None

    @classmethod
    def http(cls, url: str, token: str | None = None, **kw: Any) -> McpClient:
        """Given the ``/mcp`` URL and a key, return a client over Streamable HTTP."""
        return cls(url, token, **kw)

    @classmethod
    def stdio(cls, command: Sequence[str], env: dict[str, str] | None = None, **kw: Any) -> McpClient:
        """Given a command line (e.g. ``afi mcp --db …``), return a client over its stdio."""
        params = StdioServerParameters(command=command[0], args=list(command[1:]), env={**os.environ, **(env or {})})
        return cls(params, **kw)

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[Client]:
        async with AsyncExitStack() as stack:
            if isinstance(self.target, str):
                http = await stack.enter_async_context(create_mcp_http_client(headers=self.headers))
                client = Client(streamable_http_client(self.target, http_client=http), mode=self.mode, cache=None)
            else:
                client = Client(self.target, mode=self.mode, cache=None)
            yield await stack.enter_async_context(client)

    def connect(self) -> Client:
        """Open the MCP session now (otherwise the first call opens it); return the SDK client."""
        if self.client is None:
            manager = self._portal.wrap_async_context_manager(self._connect())
            try:
                self.client = manager.__enter__()
            except MCPError as err:
                raise _afi_error(err) from None
            except BaseExceptionGroup as group:  # the SDK's task group wraps a refusal at connect time
                found = _first_mcp_error(group)
                if found is None:
                    raise
                raise _afi_error(found) from None
            self._session_cm = manager
        return self.client

    def close(self) -> None:
        if self._session_cm is not None:
            self._session_cm.__exit__(None, None, None)
            self._session_cm, self.client = None, None
        if self._portal_cm is not None:
            self._portal_cm.__exit__(None, None, None)
            self._portal_cm = None

    def __enter__(self) -> McpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def name(self, verb: str) -> str:
        return f"afi.{verb}" if self.style == "dotted" else f"afi_{verb}"

    def call(self, verb: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call ``afi.<verb>``; return its structured result or raise the AfiError it answered."""
        client = self.connect()

        async def invoke() -> CallToolResult:
            return await client.call_tool(self.name(verb), arguments, meta=meta)  # type: ignore[arg-type]

        try:
            result = self._portal.call(invoke)
        except MCPError as err:
            raise _afi_error(err) from None
        if result.is_error:
            text = result.content[0].text if result.content and hasattr(result.content[0], "text") else ""
            raise _tool_error(text)
        data = result.structured_content
        if not isinstance(data, dict):
            raise Internal(f"afi.{verb} returned no structured content")
        return data

    # -- the verbs -------------------------------------------------------------------------

    def manifest(self) -> Manifest:
        return Manifest.model_validate(self.call("manifest", {}))

    def stat(self, path: str) -> Entry:
        return Entry.model_validate(self.call("stat", {"path": path}))

    def list(self, path: str, *, limit: int = 1000, cursor: str | None = None, glob: str | None = None) -> Page:
        args: dict[str, Any] = {"path": path, "limit": limit}
        if cursor is not None:
            args["cursor"] = cursor
        if glob is not None:
            args["glob"] = glob
        return Page.model_validate(self.call("list", args))

    def read(self, path: str, *, offset: int = 0, length: int | None = None) -> ReadResult:
        args: dict[str, Any] = {"path": path, "offset": offset}
        if length is not None:
            args["length"] = length
        out = self.call("read", args)
        raw = out["data"]
        data = base64.b64decode(raw) if out["encoding"] == "base64" else raw.encode("utf-8")
        return ReadResult(
            data=data,
            content_type=out["content_type"],
            eof=out["eof"],
            size=out["size"],
            etag=out.get("etag"),
            mtime=out.get("mtime"),
        )

    def search(self, request_or_query: SearchRequest | SearchQuery | dict[str, Any], **kw: Any) -> MatchPage:
        return MatchPage.model_validate(self.call("search", search_body(request_or_query, **kw)))

    def write(
        self,
        path: str,
        data: bytes,
        *,
        offset: int | None = None,
        append: bool = False,
        create_only: bool = False,
        if_match: str | None = None,
    ) -> Entry:
        try:
            args: dict[str, Any] = {"path": path, "data": data.decode("utf-8"), "encoding": "utf-8"}
        except UnicodeDecodeError:
            args = {"path": path, "data": base64.b64encode(data).decode("ascii"), "encoding": "base64"}
        args.update(append=append, create_only=create_only)
        if offset is not None:
            args["offset"] = offset
        if if_match is not None:
            args["if_match"] = if_match
        return Entry.model_validate(self.call("write", args))

    def mkdir(self, path: str, *, parents: bool = False) -> Entry:
        return Entry.model_validate(self.call("mkdir", {"path": path, "parents": parents}))

    def delete(self, path: str, *, recursive: bool = False) -> DeleteResult:
        return DeleteResult.model_validate(self.call("delete", {"path": path, "recursive": recursive}))

    def move(self, source: str, destination: str, *, overwrite: bool = False) -> Entry:
        return Entry.model_validate(self.call("move", {"from": source, "to": destination, "overwrite": overwrite}))
