"""Read one space of a store into :class:`~.model.SpaceData`: what ``afi export`` writes.

With ``as_of`` (canonical UTC), the space as it stood at that instant, as far as the store keeps a
past: note versions written by then (``created_at``, as ``/.afi/at`` decides) as they are stored,
ledger sessions and entries stamped by then, lineage changed by then, snapshots taken by then,
and workspace files from their kept versions when the store keeps them. Working blocks keep no past:
an instant's bundle has none.
"""

from __future__ import annotations

import json
import os
import stat as stat_mod
from pathlib import Path
from typing import TYPE_CHECKING, Any

from afi.storage.database import Database

from ..fabric.clock import ended_after
from ..fabric.types import MemoryNote
from ..horizon import horizon
from ..spaces import SPACE_NAME
from ..workspace.file_index import TEMP_PREFIX
from .history import collect_versions
from .layout import file_sha256
from .model import FileEntry, LedgerSessionData, SpaceData

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["collect_space", "store_spaces"]

_SPACE_TABLES = (
    ("SELECT DISTINCT resource_id FROM notes WHERE tenant_id = 'afi' AND thread_id = 'main'", ()),
    ("SELECT DISTINCT resource_id FROM working WHERE tenant_id = 'afi' AND thread_id = 'main'", ()),
    ("SELECT DISTINCT resource_id FROM source_lineage WHERE tenant_id = 'afi' AND thread_id = 'main'", ()),
    ("SELECT DISTINCT space FROM ledger_sessions", ()),
    ("SELECT DISTINCT space FROM snapshots", ()),
    ("SELECT DISTINCT space FROM workspace_files", ()),
)


def store_spaces(database: Database, root: Path) -> list[str]:
    """The spaces a store and its workspace root hold anything of, sorted."""
    found: set[str] = set()
    with database.read() as conn:
        for sql, args in _SPACE_TABLES:
            found.update(str(row[0]) for row in conn.execute(sql, args).fetchall())
    if root.is_dir():
        found.update(p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink() and any(p.iterdir()))
    return sorted(name for name in found if SPACE_NAME.match(name))


def collect_space(space: Space, name: str, as_of: str | None) -> SpaceData:
    """Everything of one space a bundle keeps (the caller holds the space's write lock)."""
    memory = space.fabric.memory
    where, params = ("created_at <= ?", (as_of,)) if as_of else ("TRUE", ())
    notes = memory.store.select_notes(memory.scope, where, params, order="seq")
    data = SpaceData(name, notes=notes if as_of is None else _as_then(memory.store, memory.scope, notes, as_of))
    database = memory.store.database
    data.horizon = horizon(database, name)
    scope = (memory.scope.tenant_id, memory.scope.resource_id, memory.scope.thread_id)
    with database.read() as conn:
        if as_of is None:
            row = conn.execute(
                "SELECT value, version FROM working WHERE tenant_id = ? AND resource_id = ? AND thread_id = ?", scope
            ).fetchone()
            if row is not None:
                data.working_value, data.working_version = json.loads(row[0]), int(row[1])
        data.lineage = [(str(e), str(s), str(c)) for e, s, c in conn.execute(
            "SELECT entry_id, status, changed_at FROM source_lineage WHERE tenant_id = ? AND resource_id = ? "
            f"AND thread_id = ?{_by('changed_at', as_of)} ORDER BY entry_id", (*scope, *_at(as_of)),
        ).fetchall()]  # fmt: skip
        data.snapshots = [(str(n), str(a), str(c)) for n, a, c in conn.execute(
            f"SELECT name, at, created_at FROM snapshots WHERE space = ?{_by('created_at', as_of)} ORDER BY name",
            (name, *_at(as_of)),
        ).fetchall()]  # fmt: skip
        data.sessions = _sessions(conn, name, as_of)
    data.files = collect_versions(database, name, as_of, space.workspace.jail.root)
    if as_of is None:
        data.files.entries = _workspace(space.workspace.jail.root)
    return data


def _as_then(store: Any, scope: Any, notes: list[MemoryNote], as_of: str) -> list[MemoryNote]:
    """The versions as they stood at ``as_of``: a validity ended since (superseded or retired later) is
    open again, a legal hold placed since is not there yet (a text changed in place reads as stored)."""
    later = {n.supersedes for n in store.select_notes(scope, "created_at > ? AND supersedes IS NOT NULL", (as_of,))}
    out = []
    for note in notes:
        if ended_after(note.valid_to, note.updated_at, as_of, True if note.id in later else None):
            note = note.model_copy(update={"valid_to": None})
        if note.status == "legal_hold" and note.forgotten_at is not None and note.forgotten_at > as_of:
            note = note.model_copy(update={"status": "active", "forgotten_at": None})
        out.append(note)
    return out


def _by(column: str, as_of: str | None) -> str:
    """The condition that a row's ``column`` is not past the instant (none without one)."""
    return "" if as_of is None else f" AND {column} <= ?"


def _at(as_of: str | None) -> tuple[str, ...]:
    return () if as_of is None else (as_of,)


def _sessions(conn: Any, space: str, as_of: str | None) -> list[LedgerSessionData]:
    sessions = conn.execute(
        "SELECT key, session_id, created_at FROM ledger_sessions WHERE space = ? ORDER BY session_id", (space,)
    ).fetchall()
    out: list[LedgerSessionData] = []
    for key, session_id, created_at in sessions:
        rows = conn.execute(
            "SELECT pos, mpos, entry_id, type, role, text, timestamp, ref, data FROM ledger_entries "
            f"WHERE session_key = ?{_by('timestamp', as_of)} ORDER BY pos", (key, *_at(as_of)),
        ).fetchall()  # fmt: skip
        if as_of is not None and created_at > as_of and not rows:
            continue
        entries = [
            {"pos": int(pos), "mpos": None if mpos is None else int(mpos), "entry_id": entry_id, "type": type_,
             "role": role, "text": text, "timestamp": stamp, "ref": ref, "data": json.loads(raw)}
            for pos, mpos, entry_id, type_, role, text, stamp, ref, raw in rows
        ]  # fmt: skip
        out.append(LedgerSessionData(str(session_id), str(created_at), entries))
    return out


def _kept(name: str) -> bool:
    """Not a temporary file of the workspace's own, and a name the tree can show (valid UTF-8)."""
    return not name.startswith(TEMP_PREFIX) and not any("\udc80" <= c <= "\udcff" for c in name)


def _workspace(top: Path) -> list[FileEntry]:
    """The workspace's regular files and folders, symlinks and the workspace's own temporary files left out."""
    if not top.is_dir() or top.is_symlink():
        return []
    found: list[FileEntry] = []
    for folder, dirs, names, dirfd in os.fwalk(top):
        rel = os.path.relpath(folder, top)
        prefix = "" if rel == "." else rel + "/"
        dirs[:] = [d for d in dirs if _kept(d)]
        for name in sorted(dirs + [n for n in names if _kept(n)]):
            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            if stat_mod.S_ISDIR(st.st_mode):
                found.append(FileEntry(prefix + name, "folder", st.st_mtime_ns))
            elif stat_mod.S_ISREG(st.st_mode):
                source = Path(folder, name)
                found.append(FileEntry(prefix + name, "file", st.st_mtime_ns, st.st_size, file_sha256(source), source))
    return sorted(found, key=lambda f: f.path)
