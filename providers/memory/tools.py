"""The fabric's five ``memory.*`` tools served through the provider: one backend, every effect a verb.

:class:`ProviderToolBackend` is where the tools' effects land (``fabric/tools.py`` says what a tool is
and holds the gate): a file path is a path under the caller's ``/files``, so the workspace's jail,
locks, audit, limits and indexing apply to a tool's write as to the same write through any door.
:class:`ToolSessions` attaches a gate per host session (an MCP session, say) or per call for a host
that keeps none (a ``session`` argument then names the ledger session, by default the caller's own,
:func:`own_session`); :func:`create_fabric_tools` returns the five as inert definitions for a library
host that attaches the space's fabric itself.
"""

from __future__ import annotations

import codecs
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from afi.errors import Conflict, NotFound
from afi.model import Entry
from afi.provider import Caller

from .fabric.attach import Attachment
from .fabric.errors import MemoryConflictError, MemoryLimitError, MemoryNotAttachedError, MemoryValidationError
from .fabric.fabric import MemoryFabric, create_memory_fabric
from .fabric.tools import (
    DEFAULT_MAX_FILE_BYTES,
    HARD_MAX_FILE_BYTES,
    MAX_VIEW_ENTRIES,
    TOOLS,
    AttachGate,
    ToolDefinition,
    ToolRun,
    run_tool,
)
from .ledger.records import MAX_ID_CHARS

if TYPE_CHECKING:
    from .provider import MemoryProvider

__all__ = [
    "SESSION_ARG",
    "ProviderToolBackend",
    "ToolSessions",
    "appended_text",
    "capped_text",
    "create_fabric_tools",
    "own_session",
    "with_session",
]

SESSION_ARG = "session"
_SESSION_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_ID_CHARS,
    "description": "The ledger session this call belongs to; defaults to your own (mcp-<your principal>).",
}
_APPEND_ATTEMPTS = 32


def capped_text(data: bytes, cap: int) -> tuple[str, bool]:
    """Given up to ``cap + 1`` bytes of a file, return its text cut at ``cap`` bytes and whether it was cut.

    An incremental decoder drops a multi-byte character the cap cut in half instead of mangling it.
    """
    truncated = len(data) > cap
    return codecs.getincrementaldecoder("utf-8")("replace").decode(data[:cap], final=not truncated), truncated


def appended_text(text: str, existing: int) -> bytes:
    """The bytes ``memory.insert`` appends to a file of ``existing`` bytes: a ``\\n`` first unless the file is
    empty or the text starts with one.

    Raises:
        MemoryValidationError: the text holds a lone surrogate (it has no UTF-8 form).
    """
    try:
        return (text if existing == 0 or text.startswith("\n") else "\n" + text).encode("utf-8")
    except UnicodeEncodeError:
        raise MemoryValidationError("text is not valid Unicode: it holds a lone surrogate") from None


@dataclass(frozen=True)
class ProviderToolBackend:
    """The ``memory.*`` tools' effects, each a provider verb of ``caller``.

    View and read are ``list`` and ``read`` of ``/files`` (so the workspace's jail, hidden temporary
    files and hard-link refusals apply), an insert is an append through ``write`` (locked, audited,
    within AFI_MAX_FILE_SIZE and AFI_SPACE_QUOTA, indexed, and the file's note refreshed as for any
    /files write), a block insert ``append_block``, a forget ``forget``; recall reads the fabric of the
    caller's space. ``cap`` is the tools' own byte cap on a file they read or grow.
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


def with_session(schema: dict[str, Any]) -> dict[str, Any]:
    """Given a tool's input schema, return it with the optional ``session`` argument of a session-less call."""
    return {**schema, "properties": {**schema["properties"], SESSION_ARG: _SESSION_SCHEMA}}


@dataclass
class _HostSession:
    """What the fabric's attach gate needs of a host session: an id, and entries (a host session keeps none)."""

    id: str
    opened: list[Any] = field(default_factory=list)

    def entries(self) -> list[dict[str, Any]]:
        return []


class ToolSessions:
    """The five tools of a provider for many host sessions, each behind an attach gate of its own.

    A gate is a fabric over the caller's space attached to that session alone, so attaching one
    session never detaches another; it refuses once the session closes, while the effects go through
    the provider (:class:`ProviderToolBackend`).
    """

    def __init__(self, provider: MemoryProvider) -> None:
        self.provider = provider
        self._gates: dict[str, tuple[MemoryFabric, _HostSession, Attachment]] = {}
        self._lock = threading.Lock()

    def open(self, caller: Caller, session_id: str) -> None:
        """Attach a gate of ``caller``'s space to the host session ``session_id``."""
        gate = create_memory_fabric(self.provider.fabric(caller.space).memory)
        session = _HostSession(session_id)
        attachment = gate.attach(session)
        with self._lock:
            self._gates[session_id] = (gate, session, attachment)

    def call(self, session_id: str, name: str, caller: Caller, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run one tool for the host session ``session_id`` as ``caller``.

        Raises:
            MemoryNotAttachedError: the session was never opened, or is closed.
            AfiError: what the gate, the schema or the provider refuses.
        """
        with self._lock:
            opened = self._gates.get(session_id)
        if opened is None:  # refused before the arguments are looked at, as the gate refuses
            raise MemoryNotAttachedError(f"{name} refused: this session is not attached to the fabric (fabric.attach)")
        gate, session, _ = opened
        return run_tool(name, gate, session, ProviderToolBackend(self.provider, caller), arguments)

    def call_once(self, name: str, caller: Caller, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Run one tool for a host that keeps no session: the ``session`` argument (by default the caller's
        own) names the ledger session, and the answer says which. The gate is open for this call alone."""
        rest = dict(arguments)
        session = _HostSession(_session_of(caller, rest.pop(SESSION_ARG, None)))
        gate = create_memory_fabric(self.provider.fabric(caller.space).memory)
        attachment = gate.attach(session)
        try:
            data = run_tool(name, gate, session, ProviderToolBackend(self.provider, caller), rest)
        finally:
            attachment.detach()
        return {**data, SESSION_ARG: session.id}

    def attached(self) -> set[str]:
        """Return the ids of the host sessions whose gate is attached."""
        with self._lock:
            return set(self._gates)

    def close(self, session_id: str) -> None:
        """Detach the host session's gate: its later calls are refused."""
        with self._lock:
            opened = self._gates.pop(session_id, None)
        if opened is not None:
            opened[2].detach()


def create_fabric_tools(
    provider: MemoryProvider,
    caller: Caller,
    *,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    gate: AttachGate | None = None,
) -> list[ToolDefinition]:
    """Given the provider and who calls, return the five tools as inert definitions.

    Args:
        max_file_bytes: the tools' own cap on a file they read or grow (up to 1 MiB).
        gate: the fabric whose attached session the tools answer; by default the fabric of the
            caller's space (``provider.fabric(caller.space).attach(session)`` opens it).

    Raises:
        MemoryValidationError: ``max_file_bytes`` is not a positive integer up to 1 MiB.
    """
    if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int) or max_file_bytes <= 0:
        raise MemoryValidationError("max_file_bytes must be a positive integer")
    if max_file_bytes > HARD_MAX_FILE_BYTES:
        raise MemoryValidationError(f"max_file_bytes exceeds the hard cap of {HARD_MAX_FILE_BYTES} bytes")
    opens = gate if gate is not None else provider.fabric(caller.space)
    backend = ProviderToolBackend(provider, caller, max_file_bytes)

    def bound(name: str) -> ToolRun:
        return lambda session, arguments: run_tool(name, opens, session, backend, arguments)

    return [ToolDefinition(t.name, t.description, t.input_schema, t.kind, bound(t.name)) for t in TOOLS]
