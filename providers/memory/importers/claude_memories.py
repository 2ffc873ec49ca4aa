"""A Claude memory-tool ``/memories`` directory: the files the model wrote, kept as files.

The memory tool gives the model a folder of files it views, creates and edits by path
(``/memories/notes/project.md``, ``/memories/prefs.xml``); the paths and the layout are part of
what the model remembers, and it will look for them again. So each file is written unchanged to
``/files/memories/<path>`` in the workspace, where the model's own file operations keep working
and the file note of each text file makes it recallable. Names starting with ``.``, symbolic
and hard links (which may be files outside the folder) and special files are left out and
reported; a file over the workspace's file cap is refused before anything is written.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from afi.errors import TooLarge

from ..workspace.quota import format_size
from .plan import FileItem, ImportPlan, ReadLimits, bad_input

__all__ = ["TARGET", "read_claude_memories"]

TARGET = "memories"  # the folder under /files the files land in


def read_claude_memories(path: Path, limits: ReadLimits) -> ImportPlan:
    """Given the memory directory, return its plan: one file item per regular file.

    Raises:
        InvalidPath: not a folder, or a file that cannot be read.
        TooLarge: a file over the workspace file cap (``AFI_MAX_FILE_SIZE``).
    """
    if not path.is_dir():
        raise bad_input(path.name, "a Claude memory directory is a folder (the /memories the tool wrote)")
    plan = ImportPlan(label="a Claude memory directory")
    hidden: list[str] = []
    for folder, dirs, files in os.walk(path):
        base = Path(folder).relative_to(path).as_posix()
        hidden += [f"{d}/" if base == "." else f"{base}/{d}/" for d in dirs if d.startswith(".")]
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            rel = name if base == "." else f"{base}/{name}"
            full = Path(folder) / name
            st = full.lstat()
            if name.startswith(".") or not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:  # a link may be outside
                hidden.append(rel)
                continue
            plan.files.append(_item(full, rel, limits))
    if hidden:
        plan.skipped.append(f"{len(hidden)} hidden, linked or special: {', '.join(sorted(hidden)[:5])}")
    return plan


def _item(full: Path, rel: str, limits: ReadLimits) -> FileItem:
    size = full.stat().st_size
    if size > limits.max_file_bytes:  # said before reading a file too large to keep
        cap = limits.max_file_bytes
        raise TooLarge(f"{rel}: {format_size(size)}, over the workspace file cap of {format_size(cap)} "
                       "(AFI_MAX_FILE_SIZE)")  # fmt: skip
    try:
        return FileItem(rel, f"{TARGET}/{rel}", full.read_bytes())
    except OSError as err:
        raise bad_input(rel, f"cannot be read: {err.strerror}") from None
