"""Mounting and unmounting: mount, serve until unmounted or signalled, clean up.

The kernel mount is made with ``auto_unmount``, so even a killed process leaves no mount behind (a
stale mount left by something else is caught before, by :mod:`.mountpoint`); the FUSE device is held
so that a kill releases it before fusermount3's helper wakes (:func:`_device_released_first_on_kill`).
"""

from __future__ import annotations

import fcntl
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pyfuse3
import trio

from .ops import AfiFS

__all__ = ["serve_mount"]


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
        with _device_released_first_on_kill():
            if on_mounted is not None:
                on_mounted()
            trio.run(_serve, fs)
    finally:
        pyfuse3.close(unmount=True)


@contextmanager
def _device_released_first_on_kill() -> Iterator[None]:
    """Hold one more descriptor of the FUSE device, numbered above every descriptor open now.

    A killed process's descriptors are closed in ascending order and released last-closed first, so
    the device, held last, goes first: its release aborts the connection before the socket to
    fusermount3's ``auto_unmount`` helper closes and wakes it. The helper then finds the mount dead
    (ENOTCONN) and takes it down. In the other order it may reach the mount while it is still
    connected, get ECONNABORTED, and leave a stale mount behind (about one kill in thirty when two
    mounts are killed side by side).
    """
    descriptors = _open_descriptors()
    devices = [fd for fd, target in descriptors.items() if target == "/dev/fuse"]
    if not devices:
        yield
        return
    held = fcntl.fcntl(devices[0], fcntl.F_DUPFD_CLOEXEC, max(descriptors) + 1)
    try:
        yield
    finally:
        os.close(held)


def _open_descriptors() -> dict[int, str]:
    """This process's open descriptors and what each refers to (none where /proc is not mounted)."""
    found: dict[int, str] = {}
    if not os.path.isdir("/proc/self/fd"):
        return found
    for name in os.listdir("/proc/self/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # closed since it was listed (listdir's own descriptor, for one)
            continue
    return found


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
