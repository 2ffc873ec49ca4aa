"""Workspace file versions in a bundle: read from and written to the store's file history.

The history (:mod:`..workspace.history`) is asked for lazily: a store without it has no versions to
export, and a bundle with versions is refused by a store that cannot keep them. Versions travel in
their id order (``order``), not with their ids, which are the whole store's: an import into a store
whose other spaces have versions of their own gets new ids, in the same order.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from afi.errors import Unsupported
from afi.storage.database import Database

from .layout import file_sha256
from .model import FileEntry, FileVersion, SpaceFiles

__all__ = ["collect_versions", "file_history", "restore_versions"]


def file_history(database: Database, space: str) -> Any:
    """The space's FileHistory, or None when this afi keeps no workspace file history."""
    try:
        from ..workspace.history import FileHistory
    except ImportError:
        return None
    return FileHistory(database, space)


def collect_versions(database: Database, space: str, as_of: str | None, top: Path) -> SpaceFiles:
    """The space's kept versions (with ``as_of``, those by then) and the blobs they name; with
    ``as_of``, also the files present then (from their versions, or a file without any version whose
    modification time is by then, whose current bytes stand for its past)."""
    found = SpaceFiles()
    history = file_history(database, space)
    if history is None:
        return found
    rows = [v for v in history.all_versions() if as_of is None or v.at <= as_of]
    found.versions = [FileVersion(n, v.path, v.sha256, v.size, v.at, v.op) for n, v in enumerate(rows, 1)]
    shas = sorted({v.sha256 for v in rows if v.sha256 is not None})
    for start in range(0, len(shas), 200):
        for sha in history.blobs(shas[start : start + 200]):
            found.blobs[sha] = _blob_reader(history, sha)
    if as_of is not None:
        for path, version in history.rows_at(as_of).items():
            if version.sha256 is not None and version.sha256 in found.blobs:
                found.entries.append(FileEntry(path, "file", _ns(version.at), version.size, version.sha256,
                                               found.blobs[version.sha256]))  # fmt: skip
        for path, (size, mtime_ns) in history.untracked().items():
            if _stamp(mtime_ns) <= as_of and (top / path).is_file():
                found.entries.append(FileEntry(path, "file", mtime_ns, size, file_sha256(top / path), top / path))
        found.entries.sort(key=lambda f: f.path)
    return found


def restore_versions(database: Database, space: str, files: SpaceFiles) -> None:
    """Add the bundle's versions to the space's history, in order, with the blobs the bundle kept."""
    if not files.versions:
        return
    history = file_history(database, space)
    if history is None:
        raise Unsupported("this bundle holds workspace file versions, and this afi keeps no file history: "
                          "upgrade afi-memory to import it")  # fmt: skip
    for version in sorted(files.versions, key=lambda v: v.order):
        reader = files.blobs.get(version.sha256) if version.sha256 is not None else None
        history.add_version(version.path, version.sha256, version.size, version.at, version.op,
                            data=None if reader is None else reader())  # fmt: skip


def _blob_reader(history: Any, sha: str) -> Any:
    return lambda: history.blob(sha)


def _ns(at: str) -> int:
    moment = datetime.fromisoformat(at.replace("Z", "+00:00"))
    return int(moment.timestamp() * 1000) * 1_000_000


def _stamp(mtime_ns: int) -> str:
    return datetime.fromtimestamp(mtime_ns / 1e9, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
