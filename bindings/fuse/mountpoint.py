"""Whether a folder can take a mount: checked before anything is opened, and said in words.

Nothing here loads pyfuse3 or the provider: ``afi mount`` checks the folder before it detaches.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["MountError", "check_mountpoint"]


class MountError(Exception):
    """The mountpoint cannot be used; the message says why and what to do."""


def check_mountpoint(path: Path) -> Path:
    """Given a mountpoint, return its absolute path when a mount can go there.

    Raises:
        MountError: missing, not a folder, a stale mount, already mounted, or not empty.
    """
    shown = str(path)
    try:
        os.stat(path)
    except FileNotFoundError:
        raise MountError(f"the mountpoint {shown} does not exist: create it first (mkdir -p {shown})") from None
    except OSError as err:
        if err.errno == errno.ENOTCONN:
            raise MountError(
                f"{shown} is a stale FUSE mount (the process that served it is gone): clear it with "
                f"'fusermount3 -u {shown}' (or 'umount -l {shown}'), then mount again"
            ) from None
        raise MountError(f"cannot use {shown} as a mountpoint: {err.strerror}") from None
    if not os.path.isdir(path):
        raise MountError(f"the mountpoint {shown} is not a folder")
    if os.path.ismount(path):
        raise MountError(f"{shown} is busy: something is already mounted there (unmount it: fusermount3 -u {shown})")
    if os.listdir(path):
        raise MountError(f"{shown} is not empty: mount on an empty folder, so nothing in it is hidden")
    return Path(os.path.abspath(path))
