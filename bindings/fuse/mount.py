"""Mounting and unmounting: check the mountpoint, mount, serve until unmounted or signalled, clean up.

The kernel mount is made with ``auto_unmount``, so even a killed process leaves no mount behind; a
stale mount left by something else is detected and the message says how to clear it.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pyfuse3
import trio

from .ops import AfiFS

__all__ = ["MountError", "check_mountpoint", "serve_mount"]


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


def serve_mount(
    fs: AfiFS,
    mountpoint: Path,
    *,
    on_mounted: Callable[[], None] | None = None,
    auto_unmount: bool = True,
) -> None:
    """Mount ``fs`` at ``mountpoint`` and serve it until it is unmounted, or SIGINT/SIGTERM/SIGHUP arrives.

    The mount is always taken down on the way out, however serving ended.
    """
    options = set(pyfuse3.default_options) | {"fsname=afi-memory", "subtype=afi"}
    if auto_unmount:
        options.add("auto_unmount")
    pyfuse3.init(fs, str(mountpoint), options)
    try:
        if on_mounted is not None:
            on_mounted()
        trio.run(_serve, fs)
    finally:
        pyfuse3.close(unmount=True)


async def _serve(fs: AfiFS) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_until_signalled)
        nursery.start_soon(fs.watch)
        await pyfuse3.main()
        nursery.cancel_scope.cancel()


async def _until_signalled() -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as received:
        async for _ in received:
            pyfuse3.terminate()
            return
