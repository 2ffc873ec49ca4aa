"""Bringing a store file to the schema this code knows, once per file per process.

Every part that opens the store (the provider, the fabric's store, the ledger, API and SSH keys,
receipts, the audit log) calls :func:`ensure_schema` on its connection; the first call for a file
applies what is pending and later ones return at once.
"""

from __future__ import annotations

import os
import sqlite3

from .migrations import Applied, run_steps
from .steps import STEPS

__all__ = ["ensure_schema", "main_file", "migrate"]

_ready: dict[str, tuple[int, int]] = {}  # path -> (st_dev, st_ino) of a file already brought up to date


def main_file(conn: sqlite3.Connection) -> str:
    """Return the path of the connection's main database file ("" for an in-memory database)."""
    for _seq, name, path in conn.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return str(path or "")
    return ""


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def migrate(conn: sqlite3.Connection) -> list[Applied]:
    """Apply the store's pending migration steps; return those applied (none when up to date).

    Raises:
        Unsupported: the file was migrated by a newer afi-memory than this one.
    """
    path = main_file(conn)
    done = run_steps(conn, STEPS, where=path or "in memory")
    identity = _identity(path) if path else None
    if identity is not None:
        _ready[path] = identity
    return done


def ensure_schema(conn: sqlite3.Connection) -> None:
    """Make sure the connection's file has every table (see :func:`migrate`); cheap after the first call.

    The per-process memory is keyed by the file's path and device/inode, so a file replaced under
    the same path is checked again.
    """
    path = main_file(conn)
    if path and path in _ready and _ready[path] == _identity(path):
        return
    migrate(conn)
