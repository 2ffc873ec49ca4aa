"""The fabric's five governed tools: ``memory.view``, ``memory.read``, ``memory.insert``,
``memory.recall`` and ``memory.forget`` (docs/memory-fabric.md, "Tools and the file jail").

What a tool *is* lives here: its name, kind, description and JSON schema (:data:`TOOLS`), the argument
rules, and the gate (:func:`run_tool`: a call is refused unless the fabric is attached to that session,
and its arguments are checked before anything runs). Where a tool's effects *land* is a
:class:`ToolBackend`; the provider's (``providers/memory/tools.py``) is the one there is, so a tool's
write is the provider's write.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .errors import MemoryNotAttachedError, MemoryValidationError
from .types import NOTE_KINDS

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "HARD_MAX_FILE_BYTES",
    "MAX_VIEW_ENTRIES",
    "TOOLS",
    "AttachGate",
    "ToolBackend",
    "ToolDefinition",
    "ToolInfo",
    "ToolKind",
    "ToolRun",
    "run_tool",
]

DEFAULT_MAX_FILE_BYTES = 50 * 1024
MAX_VIEW_ENTRIES = 200
HARD_MAX_FILE_BYTES = 1024 * 1024

ToolKind = Literal["read", "edit", "search", "delete"]
ToolRun = Callable[[Any, Mapping[str, Any]], dict[str, Any]]


class ToolBackend(Protocol):
    """Where the tools' effects land. Each method returns the tool's JSON-able answer and raises an
    :class:`~afi.errors.AfiError` on refusal; the arguments have passed the gate and the schema."""

    def view(self, path: str) -> dict[str, Any]:
        """``{path, entries: [{name, kind, bytes?}] (at most MAX_VIEW_ENTRIES), truncated}``."""
        ...

    def read(self, path: str) -> dict[str, Any]:
        """``{path, text (cut at the byte cap), bytes, truncated}``."""
        ...

    def append_file(self, path: str, text: str) -> dict[str, Any]:
        """``{path, bytes, note_id, note_truncated}``; ``\n`` goes first unless the file is empty or the
        text starts with one, and a file may not grow past the byte cap."""
        ...

    def append_block(self, block: str, text: str) -> dict[str, Any]:
        """``{block, id, created, chars}``."""
        ...

    def recall(self, query: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """The recall result (``options``: kinds, top_k, as_of, budget)."""
        ...

    def forget(self, *, id: str | None, block: str | None, hold: bool) -> dict[str, Any]:
        """The forget result."""
        ...


class AttachGate(Protocol):
    """What the gate reads on every call: the session the fabric is attached to (a MemoryFabric is one)."""

    @property
    def attached_session(self) -> Any: ...


@dataclass(frozen=True)
class ToolInfo:
    """One tool as a host lists it: name, kind, description and input schema."""

    name: str
    kind: ToolKind
    description: str

    @property
    def input_schema(self) -> dict[str, Any]:
        return _SCHEMAS[self.name]


@dataclass(frozen=True)
class ToolDefinition:
    """One inert tool a host may register: ``run(session, arguments)`` returns a JSON-able dict.

    ``run`` raises an :class:`~afi.errors.AfiError` (MemoryNotAttachedError, MemoryValidationError,
    MemoryLimitError, MemoryNotFoundError) on refusal; the host turns it into a tool error.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    kind: ToolKind
    run: ToolRun = field(repr=False)


def _schema(properties: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


_PATH = {"type": "string", "description": "Path relative to the memory root."}
_SCHEMAS: dict[str, dict[str, Any]] = {
    "memory.view": _schema({"path": {**_PATH, "description": "Directory to list; defaults to the root."}}),
    "memory.read": _schema({"path": _PATH}, ["path"]),
    "memory.insert": _schema(
        {
            "text": {"type": "string", "minLength": 1, "description": "Text to append."},
            "block": {"type": "string", "description": "Working block label to append to."},
            "path": {**_PATH, "description": "File to append to (its note is refreshed)."},
        },
        ["text"],
    ),
    "memory.recall": _schema(
        {
            "query": {"type": "string", "minLength": 1, "description": "What to look for."},
            "kinds": {
                "type": "array",
                "items": {"type": "string", "enum": list(NOTE_KINDS)},
                "minItems": 1,
                "description": "Kinds to search; defaults to fact and file.",
            },
            "top_k": {"type": "integer", "minimum": 1, "description": "Maximum hits."},
            "as_of": {"type": "string", "description": "ISO timestamp for the validity window; defaults to now."},
            "budget": {"type": "integer", "minimum": 1, "description": "Ceiling on the summed token count."},
        },
        ["query"],
    ),
    "memory.forget": _schema(
        {
            "id": {"type": "string", "description": "12-hex note id to forget."},
            "block": {"type": "string", "description": "Working block label to forget."},
            "hold": {"type": "boolean", "description": "Keep the note under legal hold instead of deleting it."},
        }
    ),
}


TOOLS: tuple[ToolInfo, ...] = (
    ToolInfo("memory.view", "read", "List a directory under the memory root: names and byte sizes (at most 200)."),
    ToolInfo("memory.read", "read", "Read one file under the memory root, cut at the byte cap and flagged."),
    ToolInfo(
        "memory.insert",
        "edit",
        "Append text to a working block (`block`) or to a file under the memory root (`path`), "
        "which also refreshes that file's recallable note. Exactly one target.",
    ),
    ToolInfo(
        "memory.recall",
        "search",
        "Recall notes by query, with ids, kinds, scores and why each matched. Procedures only when `kinds` names them.",
    ),
    ToolInfo(
        "memory.forget",
        "delete",
        "Tombstone one note by id, or clear one working block; `hold` keeps a note under legal hold.",
    ),
)


@functools.cache
def _validator(name: str) -> Any:
    """The tool's argument validator, compiled on its first call (jsonschema loads with it, not with the
    provider: ``afi ls`` has no use for it)."""
    import jsonschema

    return jsonschema.Draft202012Validator(_SCHEMAS[name])


def run_tool(
    name: str, gate: AttachGate, session: Any, backend: ToolBackend, arguments: Mapping[str, Any]
) -> dict[str, Any]:
    """Run one tool for ``session`` over ``backend``: the attach gate, then the schema, then the tool.

    Raises:
        MemoryNotAttachedError: ``gate`` is not attached to ``session`` (checked first, on every call:
            an unattached session learns nothing, not even schema errors).
        MemoryValidationError: the arguments break the schema or the tool's rules.
        AfiError: whatever the backend refuses.
    """
    if not _is_attached(gate, session):
        raise MemoryNotAttachedError(f"{name} refused: this session is not attached to the fabric (fabric.attach)")
    if not isinstance(arguments, Mapping):
        raise MemoryValidationError(f"{name}: arguments must be an object")
    import jsonschema

    error = jsonschema.exceptions.best_match(_validator(name).iter_errors(dict(arguments)))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "arguments"
        raise MemoryValidationError(f"{name}: {where}: {error.message}")
    return _BODIES[name](backend, arguments)


def _view(backend: ToolBackend, args: Mapping[str, Any]) -> dict[str, Any]:
    return backend.view(str(args.get("path", "")))


def _read(backend: ToolBackend, args: Mapping[str, Any]) -> dict[str, Any]:
    return backend.read(str(args["path"]))


def _insert(backend: ToolBackend, args: Mapping[str, Any]) -> dict[str, Any]:
    if ("block" in args) == ("path" in args):
        raise MemoryValidationError("memory.insert needs exactly one of 'block' or 'path'")
    if "block" in args:
        return backend.append_block(str(args["block"]), str(args["text"]))
    return backend.append_file(str(args["path"]), str(args["text"]))


def _recall(backend: ToolBackend, args: Mapping[str, Any]) -> dict[str, Any]:
    options = {key: args[key] for key in ("kinds", "top_k", "as_of", "budget") if key in args}
    return backend.recall(str(args["query"]), options)


def _forget(backend: ToolBackend, args: Mapping[str, Any]) -> dict[str, Any]:
    if ("id" in args) == ("block" in args):
        raise MemoryValidationError("memory.forget needs exactly one of 'id' or 'block'")
    return backend.forget(id=args.get("id"), block=args.get("block"), hold=bool(args.get("hold", False)))


_BODIES: dict[str, Callable[[ToolBackend, Mapping[str, Any]], dict[str, Any]]] = {
    "memory.view": _view,
    "memory.read": _read,
    "memory.insert": _insert,
    "memory.recall": _recall,
    "memory.forget": _forget,
}


def _is_attached(gate: AttachGate, session: Any) -> bool:
    """Return whether ``session`` is the one the fabric is attached to (the same object or the same id)."""
    current = gate.attached_session
    if current is None or session is None:
        return False
    if current is session:
        return True
    current_id, session_id = getattr(current, "id", None), getattr(session, "id", None)
    return isinstance(current_id, str) and bool(current_id) and current_id == session_id
