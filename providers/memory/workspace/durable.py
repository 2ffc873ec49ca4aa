"""Writing a workspace file's bytes so that none is lost quietly: every byte of a write, or a whole new
file put in place at once (a reader sees the old bytes or the new, never a part)."""

from __future__ import annotations

import contextlib
import os
import uuid

from .file_index import TEMP_PREFIX

__all__ = ["replace_at", "write_all"]


def write_all(fd: int, data: bytes, offset: int | None) -> None:
    """Write every byte (a short write on a full disk is an error, not a silent truncation)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view) if offset is None else os.pwrite(fd, view, offset)
        if written <= 0:
            raise OSError(28, "No space left on device")
        view = view[written:]
        if offset is not None:
            offset += written


def replace_at(folder: int, name: str, data: bytes, offset: int) -> None:
    """Put ``data`` (at ``offset``, a hole before it) in a new file of the folder, synced, then rename it
    over ``name``; a temporary file left by a failure is removed."""
    tmp = f"{TEMP_PREFIX}{uuid.uuid4().hex}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder)
        try:
            if offset:
                os.ftruncate(fd, offset)  # a hole, not zeros written out
                write_all(fd, data, offset)
            else:
                write_all(fd, data, None)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=folder)
        raise
