"""Where the memory provider meets the MCP binding, and ``afi mcp`` over stdio.

:func:`memory_fabric_sessions` attaches a fabric of the caller's space to each MCP session (one MCP
session = one attached fabric session) and serves it the fabric's five ``memory.*`` tools over
:class:`ProviderToolBackend`; a caller without an MCP session (the 2026 revision keeps none, nor does
stateless HTTP) gets the same tools with an optional ``session`` argument naming the ledger session a
call runs in, by default the caller's own (:func:`own_session`). Either way the attach gate and the
schemas are the fabric's, every effect is a provider verb of the MCP caller, so a tool's write is
locked, audited, within the workspace's limits and indexed like the same write through any other door.
:func:`mcp_binding` builds the binding with its receipts in the store file, :func:`mcp_http` the
Streamable HTTP endpoint ``afi serve`` mounts at ``/mcp``, and :func:`open_mcp_stdio` the stdio server
of ``afi mcp``.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
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
from afi.bindings.mcp.tools import ToolCall
from afi.errors import Conflict, NotFound
from afi.model import Entry
from afi.provider import Caller
from afi.providers.memory.fabric.errors import MemoryConflictError, MemoryLimitError, MemoryValidationError
from afi.providers.memory.fabric.fabric import create_memory_fabric
from afi.providers.memory.fabric.tool_files import appended_text, capped_text
from afi.providers.memory.fabric.tools import DEFAULT_MAX_FILE_BYTES, MAX_VIEW_ENTRIES, TOOLS, ToolInfo, run_tool
from afi.providers.memory.ledger.records import MAX_ID_CHARS
from afi.providers.memory.provider import MemoryProvider

from .local import local_owner, open_provider

__all__ = [
    "McpStdio",
    "ProviderToolBackend",
    "mcp_binding",
    "mcp_http",
    "memory_fabric_sessions",
    "open_mcp_stdio",
    "own_session",
]


@dataclass
class _McpSession:
    """What the fabric's attach gate needs of a session: an id, and entries (an MCP session keeps none)."""

    id: str
    opened: list[Any] = field(default_factory=list)

    def entries(self) -> list[dict[str, Any]]:
        return []


_APPEND_ATTEMPTS = 32


@dataclass(frozen=True)
class ProviderToolBackend:
    """The ``memory.*`` tools as the MCP host serves them: each effect a provider verb of ``caller``.

    A file path is a path under the caller's ``/files``: view and read are ``list`` and ``read`` (so
    the workspace's jail, hidden temporary files and hard-link refusals apply), an insert is an append
    through ``write`` (locked, audited, within AFI_MAX_FILE_SIZE and AFI_SPACE_QUOTA, indexed, and the
    file's note refreshed as for any /files write), a block insert ``append_block``, a forget
    ``forget``; recall reads the fabric of the caller's space. ``cap`` is the tools' own byte cap on
    a file they read or grow.
    """

    provider: MemoryProvider
    caller: Caller
    cap: int = DEFAULT_MAX_FILE_BYTES

    def view(self, path: str) -> dict[str, Any]:
        rel, where = _files_path(path)
        page = self.provider.list(self.caller, where, limit=MAX_VIEW_ENTRIES)
        entries = [_viewed(entry) for entry in page.entries]
        return {"path": rel, "entries": entries, "truncated": page.next_cursor is not None}

    def read(self, path: str) -> dict[str, Any]:
        rel, where = _files_path(path)
        result = self.provider.read(self.caller, where, length=self.cap + 1)
        text, truncated = capped_text(result.data, self.cap)
        return {"path": rel, "text": text, "bytes": result.size, "truncated": truncated}

    def append_file(self, path: str, text: str) -> dict[str, Any]:
        """Append under the file's etag (or only while it is absent), so the separator and the cap are
        decided on the bytes the append lands after; a writer that lost the race looks again."""
        rel, where = _files_path(path)
        if not rel:
            raise MemoryValidationError("memory.insert needs a file path, not the root")
        current = self._entry(where)
        for _ in range(_APPEND_ATTEMPTS):
            if current is not None and current.type == "directory":
                raise MemoryValidationError(f"{path!r} is a directory; memory.view lists directories")
            before = current.size if current is not None else 0
            payload = appended_text(text, before)
            if before + len(payload) > self.cap:
                raise MemoryLimitError(
                    f"appending {len(payload)} bytes would grow the file past {self.cap} bytes", path=rel
                )
            etag = current.etag if current is not None else None
            try:
                entry = self.provider.write(
                    self.caller, where, payload, append=True, create_only=current is None, if_match=etag
                )
            except Conflict:
                seen = self._entry(where)
                if (seen is None) == (current is None) and (seen is None or seen.etag == etag):
                    raise  # the file is as it was: the conflict is not a lost race (a parent is a file, ...)
                current = seen
                continue
            return {"path": rel, "bytes": entry.size, **self._note_of(where, entry)}
        raise MemoryConflictError(f"{rel!r} kept changing under concurrent writers; nothing was appended", path=rel)

    def append_block(self, block: str, text: str) -> dict[str, Any]:
        note, created = self.provider.append_block(self.caller, block, text)
        return {"block": block, "id": note.id, "created": created, "chars": len(note.content)}

    def recall(self, query: str, options: Mapping[str, Any]) -> dict[str, Any]:
        self.caller.require("afi:read")
        found = self.provider.fabric(self.caller.space).recall(query, **options)
        answer: dict[str, Any] = found.model_dump(mode="json", exclude_none=True)
        return answer

    def forget(self, *, id: str | None, block: str | None, hold: bool) -> dict[str, Any]:
        gone = self.provider.forget(self.caller, id=id, block=block, hold=hold)
        answer: dict[str, Any] = gone.model_dump(mode="json", exclude_none=True)
        return answer

    def _entry(self, where: str) -> Entry | None:
        try:
            entry: Entry = self.provider.stat(self.caller, where)
        except NotFound:
            return None
        return entry

    def _note_of(self, where: str, entry: Entry) -> dict[str, Any]:
        """The file's note as the /files write left it: its id, and whether it holds less than the file's
        text (it keeps the text cut at the note cap, or only the file's path when the bytes are not text)."""
        fabric = self.provider.fabric(self.caller.space)
        note = fabric.find_file(entry.path.removeprefix("/files/"))
        data = self.provider.read(self.caller, where, length=entry.size).data  # the file as this append left it
        limit = fabric.memory.limits.max_entry_text_chars
        try:
            cut = b"\x00" in data or len(data.decode("utf-8")) > limit
        except UnicodeDecodeError:
            cut = True
        return {"note_id": note.id if note is not None else None, "note_truncated": cut}


def _files_path(requested: str) -> tuple[str, str]:
    """Given a tool's path (relative to the memory root), return it normalised and as a /files path.

    Raises:
        MemoryValidationError: absolute, ``..`` or a NUL byte (the jail's rules, said before any I/O).
    """
    if "\x00" in requested:
        raise MemoryValidationError("the workspace path contains a NUL byte")
    if requested.startswith("/"):
        raise MemoryValidationError(f"absolute paths are refused: {requested!r} must be relative to the root")
    parts = [part for part in requested.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise MemoryValidationError(f"'..' is refused in workspace paths: {requested!r}")
    return "/".join(parts), "/".join(["/files", *parts])


def _viewed(entry: Entry) -> dict[str, Any]:
    name = entry.path.rsplit("/", 1)[-1]
    if entry.type == "directory":
        return {"name": name, "kind": "directory"}
    if entry.type == "file":
        return {"name": name, "kind": "file", "bytes": entry.size}
    return {"name": name, "kind": "other"}


SESSION_ARG = "session"
_SESSION_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_ID_CHARS,
    "description": "The ledger session this call belongs to; defaults to your own (mcp-<your principal>).",
}


def own_session(caller: Caller) -> str:
    """Given a caller, return the ledger session its session-less calls belong to when they name none."""
    name = "".join("_" if char in "/\x00" else char for char in caller.principal.strip()) or "anonymous"
    return f"mcp-{name}"[:MAX_ID_CHARS]


def _session_of(caller: Caller, named: Any) -> str:
    """Given the ``session`` argument (None: absent), return the ledger session id a call runs in.

    Raises:
        MemoryValidationError: a name the ledger would refuse (it names /sessions/<id>.md).
    """
    if named is None:
        return own_session(caller)
    if not isinstance(named, str) or not named or "/" in named or "\x00" in named or named != named.strip():
        raise MemoryValidationError(
            f"argument 'session' must name a ledger session: no '/', NUL or surrounding spaces, not {named!r}"
        )
    return named


def _spec(tool: ToolInfo, schema: dict[str, Any], call: ToolCall) -> ToolSpec:
    read_only = tool.kind in ("read", "search")
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


def _with_session(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "properties": {**schema["properties"], SESSION_ARG: _SESSION_SCHEMA}}


def _output(data: dict[str, Any]) -> ToolOutput:
    return ToolOutput(data, json.dumps(data, ensure_ascii=False))


class _FabricSessions:
    """One fabric per MCP session, over the caller's space, attached to that session alone."""

    def __init__(self, provider: MemoryProvider) -> None:
        self.provider = provider
        self._attached: dict[str, Any] = {}
        self._lock = threading.Lock()

    def open(self, caller: Caller, session_id: str) -> list[ToolSpec]:
        # A fabric of its own per session, so attaching one session never detaches another; it is the
        # tools' gate (they refuse once the session closes), while their effects go through the provider.
        gate = create_memory_fabric(self.provider.fabric(caller.space).memory)
        session = _McpSession(session_id)
        attachment = gate.attach(session)
        with self._lock:
            self._attached[session_id] = attachment
        specs = []
        for tool in TOOLS:

            def call(who: Caller, args: dict[str, Any], name: str = tool.name) -> ToolOutput:
                return _output(run_tool(name, gate, session, ProviderToolBackend(self.provider, who), args))

            specs.append(_spec(tool, tool.input_schema, call))
        return specs

    def sessionless(self) -> list[ToolSpec]:
        specs = []
        for tool in TOOLS:

            def call(who: Caller, args: dict[str, Any], name: str = tool.name) -> ToolOutput:
                rest = dict(args)
                session = _McpSession(_session_of(who, rest.pop(SESSION_ARG, None)))
                # The gate is open for this call alone: no MCP session will come back to close it.
                gate = create_memory_fabric(self.provider.fabric(who.space).memory)
                attachment = gate.attach(session)
                try:
                    data = run_tool(name, gate, session, ProviderToolBackend(self.provider, who), rest)
                finally:
                    attachment.detach()
                return _output({**data, SESSION_ARG: session.id})

            specs.append(_spec(tool, _with_session(tool.input_schema), call))
        return specs

    def close(self, session_id: str) -> None:
        with self._lock:
            attachment = self._attached.pop(session_id, None)
        if attachment is not None:
            attachment.detach()


def memory_fabric_sessions(provider: MemoryProvider) -> FabricSessions:
    """Given the memory provider, return what attaches a fabric to each MCP session."""
    return _FabricSessions(provider)


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
    token = config.token()
    caller = provider.authenticate(token) if token else local_owner(space or "default")
    session_id = f"stdio-{os.getpid()}"
    info = stdio_info(caller, "discovery" if discovery else "tools", session_id)
    # One client: a read run on the event loop saves a thread hop per call and holds up no one else.
    binding = mcp_binding(provider, db, tool_names=tool_names, default_info=info, inline_reads=True)
    return McpStdio(binding, session_id)
