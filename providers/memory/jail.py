"""The file jail: every workspace path is resolved here before any I/O touches it.

A jailed path is relative to the root. ``..`` segments, absolute paths and NUL bytes are refused;
then the real path of the longest existing ancestor must equal the path itself, so a symlink anywhere
on the way (pointing out of the root or not) is refused before any I/O touches the target.
"""

from __future__ import annotations

import os
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
        if relative.startswith("/"):
            raise MemoryValidationError(f"absolute paths are refused: {relative!r} must be relative to the root")
        parts = [p for p in relative.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise MemoryValidationError(f"'..' is refused in workspace paths: {relative!r}")
        target = os.path.join(self.root, *parts)
        ancestor = target
        while not os.path.lexists(ancestor):
            ancestor = os.path.dirname(ancestor)
        # The root is canonical and the parts hold no '.' or '..', so the existing part of the path is
        # its own real path exactly when no component of it is a symlink.
        real = os.path.realpath(ancestor)
        if real != ancestor:
            inside = real == str(self.root) or real.startswith(str(self.root) + os.sep)
            where = "" if inside else " (it leads outside the workspace root)"
            raise MemoryValidationError(f"symlinks are refused in the workspace: {relative!r}{where}")
        return Path(target)

    def relative(self, target: Path) -> str:
        """Given a path inside the root, return it relative to the root (POSIX separators)."""
        return target.relative_to(self.root).as_posix() if target != self.root else ""
