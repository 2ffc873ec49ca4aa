"""Mounting and unmounting: mount, serve until unmounted or signalled, clean up.

The kernel mount is made with ``auto_unmount``, so even a killed process leaves no mount behind (a
stale mount left by something else is caught before, by :mod:`.mountpoint`).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
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
