"""Write one checked space of a bundle into an empty space of a store.

What takes long is done before the write transaction: the vectors are computed by the store's own
embedder (whatever the bundle's was: vectors are derived, not carried), and the workspace files are
copied into a hidden folder of the workspace root beside the space's. Then, in one transaction (the
provider's, under the space's write lock), the rows go in, with new store-wide numbers (``seq``,
keys) in the bundle's order, and the staged folder is renamed to the space's; if the transaction
rolls back, that folder goes too. The full-text and trigram indexes follow from triggers, the ledger's
message index is written with its entries.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from afi.errors import Conflict
from afi.storage.database import Connection, Database

from ..fabric.embedders import Embedder, embedding_text
from ..horizon import raise_horizon
from ..ledger.index import index_messages
from ..ledger.session import _WRITE_LOCK
from ..workspace.file_index import INDEX_MAX_BYTES, _index_text
from .history import file_history, restore_versions
from .model import SpaceData
from .write import Progress

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..spaces import Space

__all__ = ["Prepared", "apply_space", "check_empty", "discard", "prepare", "store_holds_nothing"]

_BATCH = 64
_STAGE_PREFIX = ".afi-import-"


@dataclass
class Prepared:
    """A space ready to write: its data, one vector per note (in order), its files staged (or None)."""

    data: SpaceData
    vectors: npt.NDArray[np.float32]
    staged: Path | None


def prepare(data: SpaceData, embedder: Embedder, root: Path, progress: Progress,
            staging: Callable[[Path], None] | None = None) -> Prepared:  # fmt: skip
    """Compute the notes' vectors and stage the workspace files (nothing of the store is written);
    ``staging`` is told the staged folder's path before anything is written there."""
    import numpy as np  # here: this module's store_holds_nothing is asked by commands that embed nothing

    contents = [embedding_text(note) for note in data.notes]
    chunks = []
    for start in range(0, len(contents), _BATCH):
        chunks.append(np.asarray(embedder.embed(contents[start : start + _BATCH]), dtype=np.float32))
        progress(f"re-embedding {data.name}", min(start + _BATCH, len(contents)), len(contents))
    vectors = np.concatenate(chunks) if chunks else np.zeros((0, embedder.dims), dtype=np.float32)
    if not data.files.entries:
        return Prepared(data, vectors, None)
    root.mkdir(parents=True, exist_ok=True)
    staged = root / f"{_STAGE_PREFIX}{uuid.uuid4().hex}"
    if staging is not None:
        staging(staged)
    try:
        _stage(data, staged, progress)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return Prepared(data, vectors, staged)


def _stage(data: SpaceData, staged: Path, progress: Progress) -> None:
    staged.mkdir()
    files = [f for f in data.files.entries if f.kind == "file"]
    for f in data.files.entries:
        if f.kind == "folder":
            (staged / f.path).mkdir(parents=True, exist_ok=True)
    for n, f in enumerate(files, 1):
        target = staged / f.path
        target.parent.mkdir(parents=True, exist_ok=True)
        assert isinstance(f.source, Path)
        shutil.copyfile(f.source, target)
        os.utime(target, ns=(f.mtime_ns, f.mtime_ns))
        progress(f"files {data.name}", n, len(files))
    for f in sorted((f for f in data.files.entries if f.kind == "folder"), key=lambda f: -f.path.count("/")):
        os.utime(staged / f.path, ns=(f.mtime_ns, f.mtime_ns))


def discard(prepared: Prepared) -> None:
    """Remove a staged folder that was not moved into place."""
    if prepared.staged is not None:
        shutil.rmtree(prepared.staged, ignore_errors=True)


_HOLDINGS = (
    ("notes", "SELECT 1 FROM notes WHERE tenant_id = 'afi' AND resource_id = ? AND thread_id = 'main' LIMIT 1"),
    ("a working value", "SELECT 1 FROM working WHERE tenant_id = 'afi' AND resource_id = ? AND thread_id = 'main'"),
    ("lineage", "SELECT 1 FROM source_lineage WHERE tenant_id = 'afi' AND resource_id = ? AND thread_id = 'main' "
                "LIMIT 1"),
    ("ledger sessions", "SELECT 1 FROM ledger_sessions WHERE space = ? LIMIT 1"),
    ("snapshots", "SELECT 1 FROM snapshots WHERE space = ? LIMIT 1"),
    ("indexed files", "SELECT 1 FROM workspace_files WHERE space = ? LIMIT 1"),
)  # fmt: skip


def store_holds_nothing(database: Database, name: str) -> bool:
    """Whether the store has no row of the space (its folder on disk aside)."""
    return not _held(database, name)


def _held(database: Database, name: str) -> list[str]:
    held = []
    with database.read() as conn:
        for what, sql in _HOLDINGS:
            if conn.execute(sql, (name,)).fetchone() is not None:
                held.append(what)
        if (
            file_history(database, name) is not None
            and conn.execute("SELECT 1 FROM file_versions WHERE space = ? LIMIT 1", (name,)).fetchone() is not None
        ):
            held.append("file versions")
    return held


def check_empty(database: Database, name: str, root: Path) -> None:
    """Conflict unless the space holds nothing: an import never merges into what a space has."""
    held = _held(database, name)
    folder = root / name
    if folder.is_dir() and any(folder.iterdir()) and "indexed files" not in held:
        held.append("workspace files")
    if held:
        raise Conflict(f"the space {name!r} is not empty (it holds {', '.join(held)}): a bundle is imported "
                       "into an empty space only; import it under another name with --space", path="/")  # fmt: skip


def apply_space(database: Database, space: Space, name: str, root: Path, prepared: Prepared) -> None:
    """Write a prepared space's rows and move its files into place, inside the caller's transaction."""
    check_empty(database, name, root)
    data = prepared.data
    memory = space.fabric.memory
    scope = memory.scope
    key = (scope.tenant_id, scope.resource_id, scope.thread_id)
    for note, vector in zip(data.notes, prepared.vectors, strict=True):
        memory.store.insert_note(scope, note.model_copy(update={"scope": scope}), vector)
    with database.transaction() as conn:
        if data.working_version:
            payload = json.dumps(data.working_value, separators=(",", ":"), ensure_ascii=False)
            conn.execute("INSERT INTO working VALUES (?, ?, ?, ?, ?)", (*key, payload, data.working_version))
        conn.executemany("INSERT INTO source_lineage (tenant_id, resource_id, thread_id, entry_id, status, changed_at) "
                         "VALUES (?, ?, ?, ?, ?, ?)", [(*key, *row) for row in data.lineage])  # fmt: skip
        conn.executemany("INSERT INTO snapshots (space, name, at, created_at) VALUES (?, ?, ?, ?)",
                         [(name, *row) for row in data.snapshots])  # fmt: skip
        _ledger(database, conn, name, data)
        _files(database, conn, name, root, prepared)
        if data.horizon is not None:
            raise_horizon(conn, name, data.horizon)
    restore_versions(database, name, data.files)


def _ledger(database: Database, conn: Connection, name: str, data: SpaceData) -> None:
    if data.sessions:
        database.engine.lock_space(conn, _WRITE_LOCK, name)
    for session in data.sessions:
        key = conn.execute("INSERT INTO ledger_sessions (space, session_id, created_at) VALUES (?, ?, ?) "
                           "RETURNING key", (name, session.session_id, session.created_at)).fetchone()[0]  # fmt: skip
        messages = []
        for e in session.entries:
            seq = conn.execute(
                "INSERT INTO ledger_entries (session_key, pos, mpos, clock, entry_id, type, role, text, timestamp, "
                "ref, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
                (key, e["pos"], e["mpos"], e["pos"] + 1, e["entry_id"], e["type"], e["role"], e["text"],
                 e["timestamp"], e["ref"], json.dumps(e["data"])),
            ).fetchone()[0]  # fmt: skip
            if e["type"] == "message":
                messages.append((int(seq), f"s{key}", str(e["text"])))
        if messages:
            index_messages(database, conn, messages)


def _files(database: Database, conn: Connection, name: str, root: Path, prepared: Prepared) -> None:
    if prepared.staged is None:
        return
    rows: list[tuple[Any, ...]] = []
    for f in prepared.data.files.entries:
        if f.kind == "file":
            path = prepared.staged / f.path
            st = path.stat()
            text = _index_text(path.read_bytes()) if st.st_size <= INDEX_MAX_BYTES else ""
            rows.append((name, f.path, st.st_size, st.st_mtime_ns, text))
    conn.executemany("INSERT INTO workspace_files (space, path, size, mtime_ns, text) VALUES (?, ?, ?, ?, ?)", rows)
    target = root / name
    if target.is_dir():
        target.rmdir()  # empty: check_empty said so
    prepared.staged.rename(target)
    prepared.staged = None
    database.after_transaction(_undo_on_rollback(target))


def _undo_on_rollback(target: Path) -> Callable[[bool], None]:
    def undo(committed: bool) -> None:
        if not committed:
            with contextlib.suppress(OSError):
                shutil.rmtree(target)

    return undo
