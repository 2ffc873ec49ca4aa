"""The file jail: every workspace path is resolved here before any I/O touches it.

A jailed path is relative to the root. ``..`` segments, absolute paths, NUL bytes and symlinks
anywhere on the way are refused; then the real path of the longest existing ancestor is checked
to still lie inside the root, so a symlink or a rename race placed inside the root cannot lead out.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import MemoryValidationError

__all__ = ["FileJail"]


class FileJail:
    """Resolves relative paths inside ``root``; refuses anything that could leave it."""

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True) -> None:
        path = Path(root).expanduser()
        if create:
            path.mkdir(parents=True, exist_ok=True)
        if not path.is_dir():
            raise MemoryValidationError(f"the workspace root {str(path)!r} is not a directory")
        self.root = Path(os.path.realpath(path))

    def resolve(self, relative: str) -> Path:
        """Given a path relative to the root (``""`` or ``"."`` is the root), return the real path.

        Raises:
            MemoryValidationError: absolute, ``..``, NUL, a symlink on the way, or outside the root.
        """
        if not isinstance(relative, str):
            raise MemoryValidationError("a workspace path must be a string")
        if "\x00" in relative:
            raise MemoryValidationError("the workspace path contains a NUL byte")
        if relative.startswith("/") or relative.startswith("\\") or (len(relative) > 1 and relative[1] == ":"):
            raise MemoryValidationError(f"absolute paths are refused: {relative!r} must be relative to the root")
        parts = [p for p in relative.replace("\\", "/").split("/") if p not in ("", ".")]
        if ".." in parts:
            raise MemoryValidationError(f"'..' is refused in workspace paths: {relative!r}")
        current = self.root
        for part in parts:
            current = current / part
            try:
                mode = os.lstat(current).st_mode
            except FileNotFoundError:
                break
            except NotADirectoryError:
                raise MemoryValidationError(f"{relative!r}: a parent is not a directory") from None
            if stat.S_ISLNK(mode):
                raise MemoryValidationError(f"symlinks are refused in the workspace: {relative!r}")
        target = self.root.joinpath(*parts)
        self._check_ancestor(target, relative)
        return target

    def relative(self, target: Path) -> str:
        """Given a path inside the root, return it relative to the root (POSIX separators)."""
        return target.relative_to(self.root).as_posix() if target != self.root else ""

    def _check_ancestor(self, target: Path, relative: str) -> None:
        ancestor = target
        while not os.path.lexists(ancestor):
            ancestor = ancestor.parent
        real = os.path.realpath(ancestor)
        root = str(self.root)
        if real != root and not real.startswith(root + os.sep):
            raise MemoryValidationError(f"{relative!r} resolves outside the workspace root")
