"""Files the fabric trusts only by their SHA-256: the vendored vocabulary and the embedding model.

A file that does not match its pinned digest is refused with a :class:`MemoryValidationError` that
names the file and both digests, before anything reads it as a vocabulary or a model.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from .errors import MemoryValidationError

__all__ = ["read_pinned", "verify_pinned"]

_CHUNK = 1 << 20


def read_pinned(path: Path, sha256: str, what: str) -> bytes:
    """Given a small file, its pinned SHA-256 and what it is, return its bytes once they match.

    Raises:
        MemoryValidationError: the file's digest differs (or it cannot be read).
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise MemoryValidationError(f"{what} {path} cannot be read: {exc.strerror or exc}") from exc
    found = hashlib.sha256(data).hexdigest()
    if found != sha256:
        raise _mismatch(what, path, sha256, found, "")
    return data


def verify_pinned(path: Path, sha256: str, size: int, what: str) -> None:
    """Given a file, its pinned SHA-256 and size and what it is, return once the file matches them.

    The digest of a large file is computed once per process: a file already verified, unchanged since
    (same size, inode and modification time), is not read again.

    Raises:
        MemoryValidationError: the file is missing, or its size or digest differs.
    """
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise MemoryValidationError(f"{what} {path} cannot be read: {exc.strerror or exc}") from exc
    _verified(str(path), stat.st_size, stat.st_ino, stat.st_mtime_ns, sha256, size, what)


@functools.lru_cache(maxsize=16)  # keyed by the file's identity: only a match is cached (a refusal raises)
def _verified(path: str, found_size: int, _ino: int, _mtime_ns: int, sha256: str, size: int, what: str) -> None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise MemoryValidationError(f"{what} {path} cannot be read: {exc.strerror or exc}") from exc
    found = digest.hexdigest()
    if found != sha256:  # a file of another size has another digest too
        sizes = f" (size {found_size:,} bytes, expected {size:,})" if found_size != size else ""
        raise _mismatch(what, Path(path), sha256, found, sizes)


def _mismatch(what: str, path: Path, expected: str, found: str, sizes: str) -> MemoryValidationError:
    return MemoryValidationError(
        f"{what} {path} is not the pinned file{sizes}: its SHA-256 is {found}, expected {expected}; "
        "it was changed or damaged, so it is not used"
    )
