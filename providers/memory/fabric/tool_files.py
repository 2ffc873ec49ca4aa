"""The standalone backend of the fabric's five tools: the fabric itself, and real files through a FileJail.

:func:`~.tools.create_fabric_tools` runs the tools over :class:`FabricToolBackend`; a host that serves
them through its own provider (``afi mcp``) hands :func:`~.tools.run_tool` a backend of its own. The
file operations resolve through :class:`FileJail` and fail closed without a root; reads are bounded
before they are held and an over-cap append is refused before the file is touched.
"""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..workspace.jail import FileJail, read_at_most
from .errors import MemoryConflictError, MemoryLimitError, MemoryNotFoundError, MemoryValidationError

if TYPE_CHECKING:  # fabric.py imports tools.py, which imports this module: the fabric is named for types only
    from .fabric import MemoryFabric

__all__ = ["MAX_VIEW_ENTRIES", "FabricToolBackend", "appended_text", "capped_text"]

MAX_VIEW_ENTRIES = 200


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


class FabricToolBackend:
    """The tools over a fabric and the folder ``root`` (or ``root/space``), for a host with no provider."""

    def __init__(self, fabric: MemoryFabric, root: Path | None, cap: int, space: str | None = None) -> None:
        self.fabric = fabric
        self.files = _Files(root, cap, space)

    def view(self, path: str) -> dict[str, Any]:
        return self.files.view(path)

    def read(self, path: str) -> dict[str, Any]:
        return self.files.read(path)

    def append_file(self, path: str, text: str) -> dict[str, Any]:
        return self.files.insert(self.fabric, path, text)

    def append_block(self, block: str, text: str) -> dict[str, Any]:
        created = block not in self.fabric.blocks()
        note = self.fabric.append_block(block, text)
        return {"block": block, "id": note.id, "created": created, "chars": len(note.content)}

    def recall(self, query: str, options: Mapping[str, Any]) -> dict[str, Any]:
        return self.fabric.recall(query, **options).model_dump(mode="json", exclude_none=True)

    def forget(self, *, id: str | None, block: str | None, hold: bool) -> dict[str, Any]:
        return self.fabric.forget(id=id, block=block, hold=hold).model_dump(mode="json", exclude_none=True)


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
            raise MemoryNotFoundError("the memory root does not exist yet: nothing was written there")  # no host path
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
        text, truncated = capped_text(data, self.cap)
        return {"path": jail.normal(requested), "text": text, "bytes": size, "truncated": truncated}

    def insert(self, fabric: MemoryFabric, requested: str, text: str) -> dict[str, Any]:
        jail = self.jail(create=True)
        relative = jail.normal(requested)
        if not relative:
            raise MemoryValidationError("memory.insert needs a file path, not the root")
        existing = self._size(jail, requested)
        payload = appended_text(text, existing)
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

    def _refresh_note(self, fabric: MemoryFabric, fd: int, relative: str) -> dict[str, Any]:
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
