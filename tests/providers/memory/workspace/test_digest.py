"""A kept version's digest: a dense file's SHA-256 and bytes; a file with holes read by its data only."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from afi.providers.memory.workspace.digest import BLOCK, SPARSE_HOLE_BYTES, data_extents, file_digest

GIGA = 1_000_000_000


def _digest(path: Path, keep: int = 64 << 20) -> tuple[str, int, bytes | None, int]:
    fd = os.open(path, os.O_RDONLY)
    try:
        found = file_digest(fd, os.fstat(fd).st_size, keep)
    finally:
        os.close(fd)
    return found.sha256, found.size, found.data, found.read


def _sparse(path: Path, writes: list[tuple[int, bytes]], size: int) -> Path:
    with path.open("wb") as f:
        f.truncate(size)
        for offset, data in writes:
            f.seek(offset)
            f.write(data)
    return path


def test_a_dense_file_keeps_its_sha256_and_bytes(tmp_path: Path) -> None:
    body = os.urandom(3 * BLOCK + 17)
    (tmp_path / "dense.bin").write_bytes(body)
    assert _digest(tmp_path / "dense.bin") == (hashlib.sha256(body).hexdigest(), len(body), body, len(body))
    sha, size, data, read = _digest(tmp_path / "dense.bin", keep=100)
    assert (sha, size, data, read) == (hashlib.sha256(body).hexdigest(), len(body), None, len(body))


def test_a_small_hole_is_read_as_the_zeros_it_holds(tmp_path: Path) -> None:
    path = _sparse(tmp_path / "small-hole.bin", [(SPARSE_HOLE_BYTES - BLOCK, b"x")], SPARSE_HOLE_BYTES)
    body = path.read_bytes()
    assert _digest(path) == (hashlib.sha256(body).hexdigest(), len(body), body, len(body))


def test_a_gigabyte_hole_is_not_read(tmp_path: Path) -> None:
    path = _sparse(tmp_path / "far.bin", [(0, b"head"), (GIGA, b"x")], GIGA + 1)
    fd = os.open(path, os.O_RDONLY)
    try:
        extents = data_extents(fd, GIGA + 1)
    finally:
        os.close(fd)
    assert extents[0][0] == 0 and extents[-1][1] == GIGA + 1 and sum(e - s for s, e in extents) < 1 << 20, extents
    sha, size, data, read = _digest(path)
    assert size == GIGA + 1 and data is None and read <= 4 * BLOCK, read
    assert sha != hashlib.sha256(b"").hexdigest() and len(sha) == 64


def test_the_digest_follows_the_bytes_not_how_the_disk_holds_them(tmp_path: Path) -> None:
    """Zeros written into a hole leave the bytes, hence the digest, as they were; any other byte changes it."""
    first = _sparse(tmp_path / "a.bin", [(0, b"head"), (GIGA, b"x")], GIGA + 1)
    zeros = _sparse(tmp_path / "b.bin", [(0, b"head"), (BLOCK * 10, bytes(BLOCK * 3)), (GIGA, b"x")], GIGA + 1)
    other = _sparse(tmp_path / "c.bin", [(0, b"head"), (BLOCK * 10, b"\x01"), (GIGA, b"x")], GIGA + 1)
    longer = _sparse(tmp_path / "d.bin", [(0, b"head"), (GIGA, b"x")], GIGA + 2)
    assert os.stat(zeros).st_blocks > os.stat(first).st_blocks  # the zeros took blocks on disk
    digests = [_digest(path)[0] for path in (first, zeros, other, longer)]
    assert digests[0] == digests[1] and len(set(digests)) == 3, digests
