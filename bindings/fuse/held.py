"""The folder on disk that keeps the bytes the store refused, so an unmount or a crash loses none of them.

A file written through the mount whose content the store refuses at close (broken front matter, an
empty new note) stays at its path, marked (:mod:`.localfiles`). A shell's ``>`` never sees the error
close gives, so those bytes are the only copy of what the user wrote: the mount also keeps them here,
one space to a folder, each file at its AFI path (``<folder>/<space>/facts/broken.md`` holds exactly
the bytes written), and why it was refused beside them (``<folder>/.why/<space>/<digest>.json``). A
mount reads the folder when it starts, so the files show again, still marked, after a restart.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from afi.errors import InvalidPath
from afi.paths import normalize

__all__ = ["UNRECORDED", "HeldFolder", "HeldRecord"]

_STALE_TMP = 3600.0  # seconds after which a half-written copy is a crash's, not a write in progress
UNRECORDED = "the store refused what it holds; why was not recorded (the mount stopped first)"


@dataclass(frozen=True)
class HeldRecord:
    """One file the store refused: its AFI path, its bytes, why, the version it was written over, and when."""

    path: str
    data: bytes
    reason: str
    base_etag: str | None
    mtime_ns: int


class HeldFolder:
    """The refused files of one space on disk, under ``root``.

    Args:
        root: the folder of every space's refused files (made, mode 0700, on first use).
        space: the space whose files these are.
    """

    def __init__(self, root: Path, space: str) -> None:
        self.root = root
        self.space = space
        self._tree = root / space
        self._why = root / ".why" / space
        self._tmp = root / ".tmp"

    def where(self, path: str) -> Path:
        """Given an AFI path, return the file on disk that holds its bytes."""
        return self._tree / path.lstrip("/")

    def load(self) -> list[HeldRecord]:
        """Return every file kept in the folder; a file whose reason was not written yet gets :data:`UNRECORDED`.

        Half-written copies a crash left (older than :data:`_STALE_TMP` seconds) are removed.
        """
        if self._tmp.is_dir():
            for temporary in self._tmp.glob("*.tmp"):
                with contextlib.suppress(OSError):  # another mount's, just renamed into place
                    if time.time() - temporary.stat().st_mtime > _STALE_TMP:
                        temporary.unlink()
        records: dict[str, HeldRecord] = {}
        if self._why.is_dir():
            for meta in self._why.glob("*.json"):
                record = self._read(meta)
                if record is None:
                    meta.unlink(missing_ok=True)  # its bytes were removed first: the file was stored or deleted
                else:
                    records[record.path] = record
        if self._tree.is_dir():
            for folder, _dirs, names in os.walk(self._tree):
                for name in names:
                    found = Path(folder) / name
                    path = _afi_path(found.relative_to(self._tree))
                    if path is not None and path not in records:
                        info = found.stat()
                        records[path] = HeldRecord(path, found.read_bytes(), UNRECORDED, None, info.st_mtime_ns)
        return sorted(records.values(), key=lambda record: record.path)

    def save(self, record: HeldRecord) -> None:
        """Keep ``record`` on disk: its bytes first, then why (each written whole, synced, then renamed into place).

        Raises:
            OSError: the folder cannot take it (a full disk, a file where a folder is needed).
        """
        target = self.where(record.path)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._write(target, record.data)
        self._why.mkdir(mode=0o700, parents=True, exist_ok=True)
        meta = {
            "path": record.path,
            "reason": record.reason,
            "base_etag": record.base_etag,
            "mtime_ns": record.mtime_ns,
        }
        self._write(self._meta(record.path), json.dumps(meta, ensure_ascii=False).encode())

    def remove(self, path: str) -> None:
        """Forget ``path``: its bytes first (a reason left without them is dropped at load), then why, then
        the folders it leaves empty."""
        target = self.where(path)
        target.unlink(missing_ok=True)
        self._meta(path).unlink(missing_ok=True)
        folder = target.parent
        while folder != self._tree and self._tree in folder.parents:
            try:
                folder.rmdir()
            except OSError:  # not empty (another file is kept there), or already gone
                break
            folder = folder.parent

    def _meta(self, path: str) -> Path:
        return self._why / (hashlib.sha256(path.encode()).hexdigest()[:32] + ".json")

    def _read(self, meta: Path) -> HeldRecord | None:
        try:
            fields = json.loads(meta.read_text(encoding="utf-8"))
            path = normalize(fields["path"])
            data = self.where(path).read_bytes()
            base = fields.get("base_etag")
            return HeldRecord(
                path, data, str(fields["reason"]), base if isinstance(base, str) else None, int(fields["mtime_ns"])
            )
        except (OSError, ValueError, KeyError, TypeError, InvalidPath):
            return None

    def _write(self, target: Path, data: bytes) -> None:
        self._tmp.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = self._tmp / f"{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()


def _afi_path(relative: Path) -> str | None:
    """Given a file's place in a space's folder, return its AFI path (``None``: not one, e.g. not UTF-8)."""
    try:
        return normalize("/" + os.fsencode(relative).decode("utf-8"))
    except (UnicodeDecodeError, InvalidPath):
        return None
