"""What a workspace file's kept version records: its digest and size, and its bytes when they are kept.

A file is read once, from its descriptor. A dense file's digest is the SHA-256 of its bytes, which
are kept when it holds at most the history's cap. A file with more than :data:`SPARSE_HOLE_BYTES`
of holes (a write far past the end leaves one) is read by its data only: the file system says where
the data lies (``SEEK_DATA``/``SEEK_HOLE``), and the digest is a SHA-256 over its size and each
4 KiB block (at its offset) that is not all zeros. So a gigabyte of hole is never read, the same
bytes give the same digest however the file system lays them out, and the version keeps its size
and digest only (its bytes would be the hole's zeros).
"""

from __future__ import annotations

import errno
import hashlib
import os
from dataclasses import dataclass

__all__ = ["BLOCK", "SPARSE_HOLE_BYTES", "Digest", "data_extents", "file_digest"]

BLOCK = 4096
SPARSE_HOLE_BYTES = 1 << 20
_CHUNK = 1 << 20  # a multiple of BLOCK
_ZEROS = bytes(_CHUNK)
_SPARSE_TAG = b"afi-sparse-1\x00"


@dataclass(frozen=True)
class Digest:
    """A file's digest, its size, its bytes (None when not kept), and how many bytes were read for it."""

    sha256: str
    size: int
    data: bytes | None
    read: int


def data_extents(fd: int, size: int) -> list[tuple[int, int]]:
    """Given an open regular file and its size, return the (start, end) of each stretch of data, in
    order; the whole file when the file system does not tell holes."""
    extents: list[tuple[int, int]] = []
    position = 0
    try:
        while position < size:
            try:
                start = os.lseek(fd, position, os.SEEK_DATA)
            except OSError as err:
                if err.errno == errno.ENXIO:  # a hole from here to the end
                    break
                raise
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            if end <= start:
                break
            extents.append((start, end))
            position = end
    except OSError:  # EINVAL: no SEEK_DATA here, or the file shrank meanwhile
        return [(0, size)] if size else []
    return extents


def file_digest(fd: int, size: int, keep_bytes: int) -> Digest:
    """Given an open regular file, its size, and the most bytes a version keeps, return its digest."""
    extents = data_extents(fd, size)
    if size - sum(end - start for start, end in extents) > SPARSE_HOLE_BYTES:
        return _sparse_digest(fd, size, extents)
    digest, chunks, read = hashlib.sha256(), [], 0
    offset = 0
    while chunk := os.pread(fd, _CHUNK, offset):
        digest.update(chunk)
        read += len(chunk)
        offset += len(chunk)
        if read <= keep_bytes:
            chunks.append(chunk)
    return Digest(digest.hexdigest(), read, b"".join(chunks) if read <= keep_bytes else None, read)


def _sparse_digest(fd: int, size: int, extents: list[tuple[int, int]]) -> Digest:
    """The SHA-256 of the size and of each non-zero block by its offset, reading the data only."""
    digest = hashlib.sha256(_SPARSE_TAG + size.to_bytes(8, "big"))
    read = done = 0
    for start, end in extents:
        offset = max(start - start % BLOCK, done)  # blocks at fixed offsets, each read once
        while offset < end:
            want = min(_CHUNK, end - offset + (-(end - offset)) % BLOCK)
            chunk = os.pread(fd, want, offset)
            if not chunk:
                break
            read += len(chunk)
            if chunk != _ZEROS[: len(chunk)]:
                for at in range(0, len(chunk), BLOCK):
                    block = chunk[at : at + BLOCK]
                    if block != _ZEROS[: len(block)]:
                        digest.update((offset + at).to_bytes(8, "big") + len(block).to_bytes(4, "big"))
                        digest.update(block)
            offset += len(chunk)
        done = max(done, offset)
    return Digest(digest.hexdigest(), size, None, read)
