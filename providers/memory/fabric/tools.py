"""The fabric's five governed tools: ``memory.view``, ``memory.read``, ``memory.insert``,
``memory.recall`` and ``memory.forget`` (docs/memory-fabric.md, "Tools and the file jail").

``create_fabric_tools`` returns inert definitions: nothing is registered and nothing runs until a host
calls ``run(session, arguments)``, and every call is refused unless the fabric is attached to that
session. The file tools resolve through :class:`FileJail` and fail closed without a root; reads are
bounded before they are held and an over-cap append is refused before the file is touched.
"""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import jsonschema

from ..workspace.jail import FileJail, read_at_most
from .errors import (
    MemoryConflictError,
    MemoryLimitError,
    MemoryNotAttachedError,
    MemoryNotFoundError,
    MemoryValidationError,
)
from .types import NOTE_KINDS

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "HARD_MAX_FILE_BYTES",
    "MAX_VIEW_ENTRIES",
    "ToolDefinition",
    "ToolKind",
    "create_fabric_tools",
]

DEFAULT_MAX_FILE_BYTES = 50 * 1024
HARD_MAX_FILE_BYTES = 1024 * 1024
MAX_VIEW_ENTRIES = 200

ToolKind = Literal["read", "edit", "search", "delete"]
ToolRun = Callable[[Any, Mapping[str, Any]], dict[str, Any]]


if TYPE_CHECKING:  # the tools take the fabric itself; imported for types only (fabric.py imports this module)
    from .fabric import MemoryFabric as _Fabric


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


def create_fabric_tools(
    fabric: _Fabric,
    *,
    root: str | os.PathLike[str] | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    space: str | None = None,
) -> list[ToolDefinition]:
    """Given a fabric (and optionally a workspace root), return the five governed tool definitions.

    With ``space``, the files are those of the folder ``root/space``, which must be a real folder
    beneath ``root`` (the workspace jail's rule: a symlinked space folder is refused at every use).

    Raises:
        MemoryValidationError: ``max_file_bytes`` is not a positive integer up to 1 MiB.
    """
    if isinstance(max_file_bytes, bool) or not isinstance(max_file_bytes, int) or max_file_bytes <= 0:
        raise MemoryValidationError("max_file_bytes must be a positive integer")
    if max_file_bytes > HARD_MAX_FILE_BYTES:
        raise MemoryValidationError(f"max_file_bytes exceeds the hard cap of {HARD_MAX_FILE_BYTES} bytes")
    files = _Files(Path(root).expanduser() if root is not None else None, max_file_bytes, space)

    def view(args: Mapping[str, Any]) -> dict[str, Any]:
        return files.view(str(args.get("path", "")))

    def read(args: Mapping[str, Any]) -> dict[str, Any]:
        return files.read(str(args["path"]))

    def insert(args: Mapping[str, Any]) -> dict[str, Any]:
        text = str(args["text"])
        if ("block" in args) == ("path" in args):
            raise MemoryValidationError("memory.insert needs exactly one of 'block' or 'path'")
        if "block" in args:
            block = str(args["block"])
            created = block not in fabric.blocks()
            note = fabric.append_block(block, text)
            return {"block": block, "id": note.id, "created": created, "chars": len(note.content)}
        return files.insert(fabric, str(args["path"]), text)

    def recall(args: Mapping[str, Any]) -> dict[str, Any]:
        options = {key: args[key] for key in ("kinds", "top_k", "as_of", "budget") if key in args}
        return fabric.recall(str(args["query"]), **options).model_dump(mode="json", exclude_none=True)

    def forget(args: Mapping[str, Any]) -> dict[str, Any]:
        if ("id" in args) == ("block" in args):
            raise MemoryValidationError("memory.forget needs exactly one of 'id' or 'block'")
        target = {key: args[key] for key in ("id", "block", "hold") if key in args}
        return fabric.forget(**target).model_dump(mode="json", exclude_none=True)

    specs: list[tuple[str, ToolKind, str, Callable[[Mapping[str, Any]], dict[str, Any]]]] = [
        ("memory.view", "read", "List a directory under the memory root: names and byte sizes (at most 200).", view),
        ("memory.read", "read", "Read one file under the memory root, cut at the byte cap and flagged.", read),
        (
            "memory.insert",
            "edit",
            "Append text to a working block (`block`) or to a file under the memory root (`path`), "
            "which also refreshes that file's recallable note. Exactly one target.",
            insert,
        ),
        (
            "memory.recall",
            "search",
            "Recall notes by query, with ids, kinds, scores and why each matched. "
            "Procedures only when `kinds` names them.",
            recall,
        ),
        (
            "memory.forget",
            "delete",
            "Tombstone one note by id, or clear one working block; `hold` keeps a note under legal hold.",
            forget,
        ),
    ]
    return [
        ToolDefinition(name, description, _SCHEMAS[name], kind, _governed(fabric, name, body))
        for name, kind, description, body in specs
    ]


def _governed(fabric: _Fabric, name: str, body: Callable[[Mapping[str, Any]], dict[str, Any]]) -> ToolRun:
    validator = jsonschema.Draft202012Validator(_SCHEMAS[name])

    def run(session: Any, arguments: Mapping[str, Any]) -> dict[str, Any]:
        # The gate is read first, on every call: an unattached session learns nothing, not even schema errors.
        if not _is_attached(fabric, session):
            raise MemoryNotAttachedError(f"{name} refused: this session is not attached to the fabric (fabric.attach)")
        if not isinstance(arguments, Mapping):
            raise MemoryValidationError(f"{name}: arguments must be an object")
        error = jsonschema.exceptions.best_match(validator.iter_errors(dict(arguments)))
        if error is not None:
            where = ".".join(str(p) for p in error.absolute_path) or "arguments"
            raise MemoryValidationError(f"{name}: {where}: {error.message}")
        return body(arguments)

    return run


def _is_attached(fabric: _Fabric, session: Any) -> bool:
    """Return whether ``session`` is the one the fabric is attached to (the same object or the same id)."""
    current = fabric.attached_session
    if current is None or session is None:
        return False
    if current is session:
        return True
    current_id, session_id = getattr(current, "id", None), getattr(session, "id", None)
    return isinstance(current_id, str) and bool(current_id) and current_id == session_id


class _Files:
    """The jailed file operations behind view/read/insert; each resolves before any I/O."""

    def __init__(self, root: Path | None, cap: int, space: str | None = None) -> None:
        self.root = root
        self.cap = cap
        self.space = space

    def jail(self, *, create: bool) -> FileJail:
        if self.root is None:
            raise MemoryValidationError("these tools were built without a root, so file paths are unavailable")
        folder = self.root if self.space is None else self.root / self.space
        if not create and not os.path.lexists(folder):
            raise MemoryNotFoundError("the memory root does not exist yet", path=str(folder))
        if self.space is not None:
            return FileJail(self.root, space=self.space, create=create)
        return FileJail(self.root, create=create)

    def view(self, requested: str) -> dict[str, Any]:
        jail = self.jail(create=False)
        try:
            fd = jail.open(requested, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            raise MemoryNotFoundError(f"no such directory under the memory root: {requested!r}") from None
        except NotADirectoryError:
            raise MemoryValidationError(f"{requested!r} is a file; memory.read reads files") from None
        except OSError as err:  # ENAMETOOLONG, ELOOP (a symlink in the way), EACCES
            raise MemoryValidationError(f"{requested!r} cannot be opened inside the jail: {err.strerror}") from None
        try:
            with os.scandir(fd) as it:
                children = sorted(((e.name, e.stat(follow_symlinks=False)) for e in it), key=lambda c: c[0])
        finally:
            os.close(fd)
        entries: list[dict[str, Any]] = []
        for name, st in children[:MAX_VIEW_ENTRIES]:
            if stat.S_ISDIR(st.st_mode):
                entries.append({"name": name, "kind": "directory"})
            elif stat.S_ISREG(st.st_mode):
                entries.append({"name": name, "kind": "file", "bytes": st.st_size})
            else:
                entries.append({"name": name, "kind": "other"})
        return {"path": jail.normal(requested), "entries": entries, "truncated": len(children) > MAX_VIEW_ENTRIES}

    def read(self, requested: str) -> dict[str, Any]:
        jail = self.jail(create=False)
        fd = self._open(jail, requested, os.O_RDONLY | os.O_NONBLOCK)
        try:
            size = os.fstat(fd).st_size
            data = read_at_most(fd, self.cap + 1)
        finally:
            os.close(fd)
        truncated = len(data) > self.cap
        # An incremental decoder drops a multi-byte character the cap cut in half instead of mangling it.
        text = codecs.getincrementaldecoder("utf-8")("replace").decode(data[: self.cap], final=not truncated)
        return {"path": jail.normal(requested), "text": text, "bytes": size, "truncated": truncated}

    def insert(self, fabric: _Fabric, requested: str, text: str) -> dict[str, Any]:
        jail = self.jail(create=True)
        relative = jail.normal(requested)
        if not relative:
            raise MemoryValidationError("memory.insert needs a file path, not the root")
        existing = self._size(jail, requested)
        payload = (text if existing == 0 or text.startswith("\n") else "\n" + text).encode("utf-8")
        if existing + len(payload) > self.cap:
            raise MemoryLimitError(
                f"appending {len(payload)} bytes would grow the file past {self.cap} bytes", path=relative
            )
        try:
            jail.make_folders(jail.split(requested)[0])
        except (NotADirectoryError, FileExistsError):
            raise MemoryValidationError(f"a parent of {requested!r} is a file, not a folder") from None
        except FileNotFoundError:
            raise MemoryConflictError(f"the folders of {requested!r} changed while being made; try again") from None
        except OSError as err:
            raise MemoryValidationError(f"the folders of {requested!r} cannot be made: {err.strerror}") from None
        fd = self._open(jail, requested, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK)
        try:
            before = os.fstat(fd).st_size
            if before + len(payload) > self.cap:
                raise MemoryLimitError(f"the file grew past {self.cap} bytes meanwhile", path=relative)
            os.write(fd, payload)
            try:
                note_info = self._refresh_note(fabric, fd, relative)
            except BaseException:
                os.ftruncate(fd, before)  # the note write failed: leave the file exactly as it was
                raise
        finally:
            os.close(fd)
        return {"path": relative, "bytes": before + len(payload), **note_info}

    @staticmethod
    def _size(jail: FileJail, requested: str) -> int:
        """The size of the file now (0 when there is none yet), looked at through the jail."""
        try:
            fd = jail.open(requested, os.O_RDONLY | os.O_NONBLOCK)
        except (FileNotFoundError, NotADirectoryError):
            return 0
        except OSError as err:
            raise MemoryValidationError(f"{requested!r} cannot be opened inside the jail: {err.strerror}") from None
        try:
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def _refresh_note(self, fabric: _Fabric, fd: int, relative: str) -> dict[str, Any]:
        os.lseek(fd, 0, os.SEEK_SET)
        content = read_at_most(fd, self.cap).decode("utf-8", "replace")
        limit = int(fabric.memory.limits.max_entry_text_chars)
        indexed = content[:limit]
        note = fabric.remember(kind="file", path=relative, content=indexed)
        return {"note_id": note.id, "note_truncated": len(indexed) < len(content)}

    @staticmethod
    def _open(jail: FileJail, requested: str, flags: int) -> int:
        try:
            fd = jail.open(requested, flags, 0o644)
        except FileNotFoundError:
            raise MemoryNotFoundError(f"no such file under the memory root: {requested!r}") from None
        except IsADirectoryError:
            raise MemoryValidationError(f"{requested!r} is a directory; memory.view lists directories") from None
        except OSError as err:
            # O_NOFOLLOW answers ELOOP when the last component became a symlink after the jail check.
            raise MemoryValidationError(f"{requested!r} cannot be opened inside the jail: {err.strerror}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise MemoryValidationError(f"{requested!r} is not a regular file")
        return fd
