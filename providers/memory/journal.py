"""The workspace files an import writes in place, journaled so that a refusal or a crash takes them back.

A foreign import (``afi import`` of a Markdown folder, a Claude ``/memories`` folder, …) may write
files into a space that already holds some, where they go: under the space's write lock, inside the
import's one transaction. Before each file, the journal (``journal.jsonl`` in the import's staging
folder, which the space's claim names: claims.py) records its path, the SHA-256 of the bytes about
to be written, a copy of the file it replaces (if any), and the first folder the write creates (if
any). The import's transaction also writes a marker row in ``meta``: if that row is there, the
import committed and its journal is only dropped; if not (it rolled back, or its process died
first), :func:`undo` puts the workspace back as it was: a file still holding the bytes the import
wrote gets its old copy again, or goes; the folders the import made go when empty. A file that
holds other bytes by then was written by someone else afterwards, and is left alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

from afi.storage.database import Connection, Database

from .fabric.errors import MemoryValidationError
from .workspace.jail import FileJail

__all__ = ["JOURNAL", "FileJournal", "committed", "forget_marker", "marker_of", "undo"]

JOURNAL = "journal.jsonl"
_MARKER = "import-committed:"  # + the staging folder's name: a row of ``meta``


class FileJournal:
    """The journal of one import, in its staging folder ``staging`` (made here), over ``jail``'s space."""

    def __init__(self, staging: Path, jail: FileJail) -> None:
        self.staging = staging
        self.jail = jail
        staging.mkdir()
        (staging / "backup").mkdir()
        self._file = open(staging / JOURNAL, "a", encoding="utf-8")  # noqa: SIM115 - open for the import's life
        self._count = 0

    @property
    def marker(self) -> str:
        """The ``meta`` key whose row says this import committed."""
        return marker_of(self.staging)

    def before_write(self, rel: str, data: bytes) -> None:
        """Record, before ``data`` is written at ``rel``, what undoing that write needs."""
        self._count += 1
        parent, name = self.jail.split(rel)
        backup = None
        made = _first_missing(self.jail, parent)
        if made is None:
            with self.jail.folder(parent) as folder, contextlib.suppress(FileNotFoundError):
                if stat.S_ISREG(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
                    backup = f"backup/{self._count}"
                    _copy_out(folder, name, self.staging / backup)
        entry = {"rel": rel, "sha256": hashlib.sha256(data).hexdigest(), "backup": backup, "made": made}
        self._file.write(json.dumps(entry) + "\n")
        self._file.flush()  # in the kernel before the file is written: a kill -9 cannot lose it

    def mark_committed(self, conn: Connection) -> None:
        """Write the marker row, in the import's transaction (``conn``)."""
        conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (self.marker, "1"))

    def close(self) -> None:
        self._file.close()


def marker_of(staging: Path) -> str:
    """The ``meta`` key whose row says the import staged in ``staging`` committed."""
    return _MARKER + staging.name


def committed(database: Database, marker: str) -> bool:
    """Whether the import whose marker is ``marker`` committed."""
    with database.read() as conn:
        return conn.execute("SELECT 1 FROM meta WHERE key = ?", (marker,)).fetchone() is not None


def forget_marker(database: Database, marker: str) -> None:
    """Drop a committed import's marker row (its journal is gone)."""
    with database.transaction() as conn:
        conn.execute("DELETE FROM meta WHERE key = ?", (marker,))


def undo(staging: Path, jail: FileJail) -> int:
    """Put back what the journal in ``staging`` says the import wrote (see the module docstring); return
    how many files were put back or removed."""
    try:
        lines = (staging / JOURNAL).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return 0
    done = 0
    for line in reversed(lines):
        try:
            entry = json.loads(line)
            rel, sha, backup, made = str(entry["rel"]), str(entry["sha256"]), entry["backup"], entry["made"]
        except (ValueError, KeyError, TypeError):
            continue  # a line the kill cut short: its file was not written yet
        done += _put_back(jail, rel, sha, None if backup is None else staging / str(backup))
        if isinstance(made, str):
            _remove_empty(jail, rel, made)
    return done


def _first_missing(jail: FileJail, folder: str) -> str | None:
    """The first folder on the way to ``folder`` (itself included) that does not exist yet, or None."""
    parts = [p for p in folder.split("/") if p]
    if not jail.root_exists:
        return ""
    for depth in range(1, len(parts) + 1):
        here = "/".join(parts[:depth])
        try:
            with jail.folder(here):
                pass
        except FileNotFoundError:
            return here
    return None


def _copy_out(folder: int, name: str, to: Path) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    with os.fdopen(fd, "rb") as src, open(to, "wb") as dst:
        shutil.copyfileobj(src, dst)
        st = os.fstat(src.fileno())
    os.utime(to, ns=(st.st_atime_ns, st.st_mtime_ns))  # the index knows the file by its size and mtime


def _put_back(jail: FileJail, rel: str, sha: str, backup: Path | None) -> int:
    try:
        parent, name = jail.split(rel)
        with jail.folder(parent) as folder:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=folder)
            with os.fdopen(fd, "rb") as held:
                if not stat.S_ISREG(os.fstat(fd).st_mode) or hashlib.file_digest(held, "sha256").hexdigest() != sha:
                    return 0  # not what the import wrote (it never got to it, or someone wrote since)
            if backup is not None:
                os.replace(backup, name, dst_dir_fd=folder)
            else:
                os.unlink(name, dir_fd=folder)
            return 1
    except (OSError, MemoryValidationError):
        return 0


def _remove_empty(jail: FileJail, rel: str, made: str) -> None:
    """Remove the folders from ``rel``'s own up to ``made`` (the first the import created) while empty."""
    parts = rel.split("/")[:-1]
    top = len([p for p in made.split("/") if p])
    for depth in range(len(parts), top - 1, -1):
        if depth == 0:
            with contextlib.suppress(OSError):
                os.rmdir(jail.root)  # the space's folder, made by this import
            return
        parent, name = "/".join(parts[: depth - 1]), parts[depth - 1]
        try:
            with jail.folder(parent) as folder:
                os.rmdir(name, dir_fd=folder)
        except (OSError, MemoryValidationError):
            return  # not empty (or gone): the folders above it stay too
