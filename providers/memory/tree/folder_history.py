"""Keeping which folders of ``/files`` were made and removed, so a sync can carry empty folders.

A folder with files in it travels with them (a file's parents are made where it lands); an empty
folder has nothing to travel with. Each ``mkdir``, and each folder a delete or a move takes away or
makes, records the folder's last operation and its time (``folder_ops``: one row per path, the latest
wins), under the space's write lock the verb holds. A sync sends these rows whole with the space's
blocks and snapshots (:mod:`..sync.space_state`) and each side makes or removes the folders alike.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from afi.errors import AfiError

from ..fabric.rows import iso_now
from ..workspace.workspace import is_reserved

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["FOLDER_OPS", "folders_below", "keep_folders", "moved_folders"]

FOLDER_OPS = ("mkdir", "rmdir")


def folders_below(space: Space, rel: str) -> list[str]:
    """The workspace paths of the folders at or below ``rel`` (none when it is a file or absent)."""
    try:
        if space.workspace.stat(rel, f"/files/{rel}").kind != "directory":
            return []
        top = space.workspace.jail.resolve(rel)
    except (AfiError, OSError):
        return []
    found = [rel]
    for folder, dirs, _files in os.walk(top):
        dirs[:] = [d for d in dirs if not is_reserved(d)]
        base = os.path.relpath(folder, top)
        found += [f"{rel}/{d}" if base == "." else f"{rel}/{base}/{d}" for d in dirs]
    return found


def moved_folders(before: Sequence[str], source: str, destination: str) -> list[tuple[str, str]]:
    """Given the folders at or below ``source`` before a move to ``destination``: each one's
    ``rmdir`` and the ``mkdir`` of where it went."""
    ops = [(path, "rmdir") for path in before]
    return ops + [(destination + path[len(source) :], "mkdir") for path in before]


def keep_folders(space: Space, ops: Sequence[tuple[str, str]]) -> None:
    """Record each ``(path, op)`` as that folder's last operation, now."""
    if not ops:
        return
    at = iso_now()
    with space.files.database.transaction() as conn:
        conn.executemany(
            "INSERT INTO folder_ops (space, path, op, at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (space, path) DO UPDATE SET op = excluded.op, at = excluded.at",
            [(space.files.space, path, op, at) for path, op in ops],
        )
