"""What the tree needs to know of a workspace entry, read from one ``stat``."""

from __future__ import annotations

import os
import stat as stat_mod
from dataclasses import dataclass

__all__ = ["FileStat", "file_stat"]


@dataclass(frozen=True)
class FileStat:
    """What the tree needs of a workspace entry."""

    name: str
    kind: str  # "file" | "directory" | "symlink"
    size: int
    mtime: float
    ctime: float
    mtime_ns: int
    ino: int
    target: str | None = None


def file_stat(name: str, st: os.stat_result, target: str | None = None) -> FileStat:
    if stat_mod.S_ISDIR(st.st_mode):
        kind = "directory"
    elif stat_mod.S_ISLNK(st.st_mode):
        kind = "symlink"
    else:
        kind = "file"
    size = 0 if kind == "directory" else st.st_size
    return FileStat(name, kind, size, st.st_mtime, st.st_ctime, st.st_mtime_ns, st.st_ino, target)
