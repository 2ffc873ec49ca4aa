"""What the SFTP subsystem says on the wire: AfiErrors as SFTP statuses, entries as SFTP attributes,
and the open-file handle asyncssh hands back to each request."""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass, field

import asyncssh
from asyncssh import SFTPAttrs

from afi.errors import ERRNO, AfiError
from afi.model import Entry

from .fmt import mode_string, parse_time

__all__ = ["Handle", "entry_attrs", "file_attrs", "handle_of", "sftp_error"]

_STATUS: dict[int, Callable[[str], asyncssh.SFTPError]] = {
    errno.ENOENT: asyncssh.SFTPNoSuchFile,
    errno.EACCES: asyncssh.SFTPPermissionDenied,
    errno.EEXIST: asyncssh.SFTPFileAlreadyExists,
    errno.ENOSYS: asyncssh.SFTPOpUnsupported,
    errno.EINVAL: asyncssh.SFTPInvalidParameter,
}


def sftp_error(err: AfiError) -> asyncssh.SFTPError:
    """Given an AfiError, return the SFTP error the client shows (the message keeps the AFI code)."""
    cls = _STATUS.get(ERRNO.get(err.code, errno.EIO), asyncssh.SFTPFailure)
    where = f"{err.path}: " if err.path else ""
    return cls(f"{where}{err.code}: {err.message}")


@dataclass
class Handle:
    path: str
    writing: bool
    buffer: bytearray = field(default_factory=bytearray)
    dirty: bool = False
    create_only: bool = False
    local: bool = False  # a memory-only file (its name is one the provider refuses)
    refused: bool = False  # storing it as it stands was refused (at a stat): not tried again until it changes


def file_attrs(size: int, stamp: float) -> SFTPAttrs:
    moment = int(stamp)
    return SFTPAttrs(type=1, size=size, permissions=0o100644, uid=0, gid=0, atime=moment, mtime=moment, nlink=1)


def entry_attrs(entry: Entry) -> SFTPAttrs:
    mode = mode_string(entry)
    bits = 0
    for index, char in enumerate(mode[1:]):
        if char != "-":
            bits |= 1 << (8 - index)
    kind = {"directory": 0o040000, "symlink": 0o120000}.get(entry.type, 0o100000)
    stamp = int(parse_time(entry.mtime).timestamp())
    return SFTPAttrs(
        type={"directory": 2, "symlink": 3}.get(entry.type, 1),
        size=entry.size,
        permissions=kind | bits,
        uid=0,
        gid=0,
        atime=stamp,
        mtime=stamp,
        nlink=2 if entry.type == "directory" else 1,
    )


def handle_of(file_obj: object) -> Handle:
    if not isinstance(file_obj, Handle):  # pragma: no cover - asyncssh hands back what open returned
        raise asyncssh.SFTPFailure("bad file handle")
    return file_obj
