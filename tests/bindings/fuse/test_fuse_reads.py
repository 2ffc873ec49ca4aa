"""Reads through the FUSE operations as the kernel's readahead sends them: several at once on one handle.

The operations run in trio over a real provider (a SQLite file and a jail in tmp_path), without a
kernel mount: the kernel's part (which reads arrive, and when) is what these tests play.
"""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path
from typing import Any

import pyfuse3
import pytest
import trio

from afi.bindings.fuse import AfiFS
from afi.bindings.fuse.base import WINDOW
from afi.providers.memory.provider import MemoryProvider

CHUNK = 128 << 10


class CountingProvider(MemoryProvider):
    """The memory provider, counting the reads it serves (what the binding asks of it is the measure)."""

    reads = 0

    def read(self, *args: Any, **kw: Any) -> Any:
        self.reads += 1
        return super().read(*args, **kw)


def _fs(tmp_path: Path, data: bytes) -> tuple[AfiFS, CountingProvider]:
    provider = CountingProvider(tmp_path / "afi.db", tmp_path / "files")
    owner = provider.authenticate(None)
    provider.write(owner, "/files/big.bin", data)
    return AfiFS(provider, owner), provider


async def _open(fs: AfiFS) -> int:
    files = await fs.lookup(pyfuse3.ROOT_INODE, b"files")
    big = await fs.lookup(files.st_ino, b"big.bin")
    info = await fs.open(big.st_ino, os.O_RDONLY, None)
    return int(info.fh)


def test_readahead_reads_in_one_window_share_one_provider_read(tmp_path: Path) -> None:
    data = random.Random(7).randbytes(3 * WINDOW + 1000)
    fs, provider = _fs(tmp_path, data)
    got: dict[int, bytes] = {}

    async def main() -> None:
        fh = await _open(fs)
        provider.reads = 0

        async def read(offset: int) -> None:
            got[offset] = await fs.read(fh, offset, CHUNK)

        async with trio.open_nursery() as nursery:  # the whole file, all reads in flight at once
            for offset in range(0, len(data), CHUNK):
                nursery.start_soon(read, offset)

    trio.run(main)
    assert b"".join(got[offset] for offset in sorted(got)) == data
    # One provider read per window the reads fall in (4 here), not one per 128 KiB read (25).
    assert provider.reads <= 4 + 1


def test_reads_waiting_on_a_failed_fetch_get_the_error_and_nothing_hangs(tmp_path: Path) -> None:
    fs, provider = _fs(tmp_path, b"x" * (2 * WINDOW))
    outcomes: list[int] = []

    async def main() -> None:
        fh = await _open(fs)
        provider.delete(provider.authenticate(None), "/files/big.bin")

        async def read(offset: int) -> None:
            with pytest.raises(pyfuse3.FUSEError) as caught:
                await fs.read(fh, offset, CHUNK)
            outcomes.append(caught.value.errno)

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for offset in range(0, WINDOW, CHUNK):
                    nursery.start_soon(read, offset)

    trio.run(main)
    assert outcomes == [errno.ENOENT] * (WINDOW // CHUNK)
