"""The ``afi.*`` MCP tools: one per AFI verb, each a thin call of that verb (docs/afi.md, "MCP").

A :class:`ToolSpec` is transport-free: a name, schemas, honest annotations and a synchronous
``call(caller, arguments)`` that returns a :class:`ToolOutput` or raises an AfiError. The binding
(:mod:`afi.bindings.mcp`) lists them, validates arguments against ``input_schema`` and runs ``call``
in a worker thread. Argument names are the verbs' (docs/afi.md, "Verbs"): ``path``, ``limit``,
``cursor``, ``glob``, ``offset``, ``length``, ``query``, ``from``/``to``... ``afi.read`` answers text as
text and other bytes as base64.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from afi.errors import InvalidPath
from afi.model import DeleteResult, Entry, MatchPage, Page, ReadResult, SearchRequest, dump
from afi.provider import Caller, Provider

from .schema import model_output_schema

__all__ = ["ToolOutput", "ToolSpec", "afi_tools", "read_output"]


@dataclass(frozen=True)
class ToolOutput:
    """What a tool returns: the structured object, and the text a model reads."""

    structured: dict[str, Any]
    text: str


ToolCall = Callable[[Caller, dict[str, Any]], ToolOutput]


@dataclass(frozen=True)
class ToolSpec:
    """One tool, independent of the transport; ``name`` is the dotted canonical name."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    read_only: bool
    destructive: bool
    idempotent: bool
    call: ToolCall
    searches: bool = False  # queues in the search lane (bindings/offload.py: search_lane)

    @property
    def writes(self) -> bool:
        return not self.read_only


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


_PATH = {"type": "string", "description": "Absolute AFI path, e.g. /facts/coffee.md or /files/notes/todo.txt"}
_FLAG = {"type": "boolean", "default": False}
_QUERY = {
    "description": "A string (case-sensitive substring), {regex, flags} (ECMAScript, flags from i m s u) "
    "or {semantic, threshold} (a question; matches carry a score), or {conversation, session} (x-conversation: "
    "what was said in a session's transcript, each match with the page of messages around it).",
    "anyOf": [
        {"type": "string"},
        _object({"regex": {"type": "string"}, "flags": {"type": "string"}}, ("regex",)),
        _object({"semantic": {"type": "string"}, "threshold": {"type": "number"}}, ("semantic",)),
        _object(
            {
                "conversation": {"type": "string"},
                "session": {"type": "string"},
                "page_limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "direction": {"enum": ["backward", "forward"]},
                "detail": {"enum": ["summary", "full"]},
            },
            ("conversation", "session"),
        ),
    ],
}
_READ_OUTPUT = _object(
    {
        "path": {"type": "string"},
        "content_type": {"type": "string"},
        "encoding": {"type": "string", "enum": ["utf-8", "base64"]},
        "data": {"type": "string", "description": "The bytes: text when encoding is utf-8, else base64."},
        "eof": {"type": "boolean"},
        "size": {"type": "integer"},
        "etag": {"type": "string"},
        "mtime": {"type": "string"},
    },
    ("path", "content_type", "encoding", "data", "eof", "size"),
)

INPUTS: dict[str, dict[str, Any]] = {
    "afi.manifest": _object({}),
    "afi.stat": _object({"path": _PATH}, ("path",)),
    "afi.list": _object(
        {
            "path": _PATH,
            "limit": {"type": "integer", "minimum": 1, "default": 1000},
            "cursor": {"type": "string", "description": "next_cursor of the previous page"},
            "glob": {"type": "string", "description": "shell pattern on child names: * ? [a-z] [!a] [^a], \\ escapes"},
        },
        ("path",),
    ),
    "afi.read": _object(
        {
            "path": _PATH,
            "offset": {"type": "integer", "minimum": 0, "default": 0},
            "length": {"type": "integer", "minimum": 0, "description": "bytes to read; the rest of the file if absent"},
        },
        ("path",),
    ),
    "afi.search": _object(
        {
            "query": _QUERY,
            "path": {**_PATH, "default": "/"},
            "limit": {"type": "integer", "minimum": 1, "default": 100},
            "cursor": {"type": "string"},
            "x-context": {"type": "integer", "minimum": 0, "description": "lines of context around each match"},
            "x-kinds": {"type": "array", "items": {"type": "string"}, "description": "note kinds (semantic mode)"},
            "x-as-of": {"type": "string", "description": "RFC 3339 time for the validity window (semantic mode)"},
            "x-budget": {"type": "integer", "minimum": 1, "description": "token budget (semantic mode)"},
        },
        ("query",),
    ),
    "afi.write": _object(
        {
            "path": _PATH,
            "data": {"type": "string", "description": "The bytes to write: text, or base64 with encoding=base64"},
            "encoding": {"type": "string", "enum": ["utf-8", "base64"], "default": "utf-8"},
            "offset": {"type": "integer", "minimum": 0},
            "append": _FLAG,
            "create_only": _FLAG,
            "if_match": {"type": "string", "description": "etag the target must still have"},
        },
        ("path", "data"),
    ),
    "afi.mkdir": _object({"path": _PATH, "parents": _FLAG}, ("path",)),
    "afi.delete": _object({"path": _PATH, "recursive": _FLAG}, ("path",)),
    "afi.move": _object({"from": _PATH, "to": _PATH, "overwrite": _FLAG}, ("from", "to")),
}

DESCRIPTIONS = {
    "afi.manifest": "The AFI manifest: profile, verbs, search modes, limits (also the resource afi://manifest.json).",
    "afi.stat": "stat: one entry (type, size, times, content type, etag, note attributes) of a path.",
    "afi.list": "list: the direct children of a folder, sorted by path, paged with a cursor.",
    "afi.read": "read: the bytes of a file (a note reads as Markdown with YAML front matter); "
    "text as text, other bytes as base64.",
    "afi.search": "search the memory: exact substring or regex (grep, ordered by path and line) or semantic "
    "(recall, ordered by score).",
    "afi.write": "write a file or a note: /facts/<name>.md and /procedures/<name>.md remember a note, "
    "/working/<block>.md sets a working block, /files/... writes a real file.",
    "afi.mkdir": "mkdir: create a folder under /files.",
    "afi.delete": "delete a file or folder under /files, or forget a note.",
    "afi.move": "move or rename within one area (a file note follows its file).",
}


def _json_text(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _entry(entry: Entry | Page | MatchPage | DeleteResult) -> ToolOutput:
    data = dump(entry)
    return ToolOutput(data, _json_text(data))


def read_output(path: str, result: ReadResult) -> ToolOutput:
    """Given a read result, return text as text, or base64 when the bytes are not UTF-8 text."""
    try:
        text = result.data.decode("utf-8")
        encoding = "utf-8" if "\x00" not in text else "base64"
    except UnicodeDecodeError:
        encoding = "base64"
    data = text if encoding == "utf-8" else base64.b64encode(result.data).decode("ascii")
    out: dict[str, Any] = {
        "path": path,
        "content_type": result.content_type,
        "encoding": encoding,
        "data": data,
        "eof": result.eof,
        "size": result.size,
    }
    if result.etag is not None:
        out["etag"] = result.etag
    if result.mtime is not None:
        out["mtime"] = result.mtime
    shown = data if encoding == "utf-8" else f"({len(result.data)} bytes of {result.content_type}, base64) {data}"
    return ToolOutput(out, shown)


def _payload(args: dict[str, Any]) -> bytes:
    data = str(args["data"])
    if args.get("encoding", "utf-8") == "base64":
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidPath("data is not valid base64 (encoding=base64)") from None
    return data.encode("utf-8")


def _search_request(args: dict[str, Any]) -> SearchRequest:
    try:
        return SearchRequest.model_validate(args)
    except ValidationError as err:
        problems = "; ".join(
            f"argument '{'.'.join(str(p) for p in e['loc']) or 'query'}': {e['msg'][:1].lower()}{e['msg'][1:]}"
            for e in err.errors()
        )
        raise InvalidPath(f"afi.search: {problems}") from None


def afi_tools(provider: Provider) -> list[ToolSpec]:
    """Given a provider, return the nine ``afi.*`` tools, each calling one of its verbs."""

    def manifest(caller: Caller, args: dict[str, Any]) -> ToolOutput:
        data = provider.manifest().model_dump(mode="json", by_alias=True, exclude_none=True)
        return ToolOutput(data, _json_text(data))

    def stat(caller: Caller, args: dict[str, Any]) -> ToolOutput:
        return _entry(provider.stat(caller, args["path"]))

    def list_(caller: Caller, args: dict[str, Any]) -> ToolOutput:
        page = provider.list(
            caller, args["path"], limit=args.get("limit", 1000), cursor=args.get("cursor"), glob=args.get("glob")
        )
        return _entry(page)

    def read(caller: Caller, args: dict[str, Any]) -> ToolOutput:
        result = provider.read(caller, args["path"], offset=args.get("offset", 0), length=args.get("length"))
        return read_output(args["path"], result)

    def search(caller: Caller, args: dict[str, Any]) -> ToolOutput:
        return _entry(provider.search(caller, _search_request(args)))

    def write(caller: Caller, args: dict[str, Any]) -> ToolOutput:
        entry = provider.write(
            caller,
            args["path"],
            _payload(args),
            offset=args.get("offset"),
            append=args.get("append", False),
            create_only=args.get("create_only", False),
            if_match=args.get("if_match"),
        )
        return _entry(entry)

    def mkdir(caller: Caller, args: dict[str, Any]) -> ToolOutput:
        return _entry(provider.mkdir(caller, args["path"], parents=args.get("parents", False)))

    def delete(caller: Caller, args: dict[str, Any]) -> ToolOutput:
        return _entry(provider.delete(caller, args["path"], recursive=args.get("recursive", False)))

    def move(caller: Caller, args: dict[str, Any]) -> ToolOutput:
        return _entry(provider.move(caller, args["from"], args["to"], overwrite=args.get("overwrite", False)))

    entry_schema = model_output_schema(Entry)
    table: list[tuple[str, ToolCall, dict[str, Any], bool, bool, bool]] = [
        # name, call, output schema, read_only, destructive, idempotent
        ("afi.manifest", manifest, {"type": "object", "additionalProperties": True}, True, False, True),
        ("afi.stat", stat, entry_schema, True, False, True),
        ("afi.list", list_, model_output_schema(Page), True, False, True),
        ("afi.read", read, _READ_OUTPUT, True, False, True),
        ("afi.search", search, model_output_schema(MatchPage), True, False, True),
        ("afi.write", write, entry_schema, False, True, False),
        ("afi.mkdir", mkdir, entry_schema, False, False, True),
        ("afi.delete", delete, model_output_schema(DeleteResult), False, True, True),
        ("afi.move", move, entry_schema, False, True, False),
    ]
    capabilities = set(provider.manifest().capabilities)
    return [
        ToolSpec(
            name,
            DESCRIPTIONS[name],
            INPUTS[name],
            output,
            read_only,
            destructive,
            idempotent,
            call,
            searches=call is search,
        )
        for name, call, output, read_only, destructive, idempotent in table
        if name == "afi.manifest" or name.removeprefix("afi.") in capabilities
    ]
