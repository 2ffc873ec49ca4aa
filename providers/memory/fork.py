"""``afi space fork SRC[@WHEN] DST``: a new space that starts as SRC stood at an instant, like a git branch.

What goes across, into a DST that must hold nothing yet:

- every fact and procedure version written by the instant, whole: ids, times, validity, links,
  supersedes, lineage (and the session entries revoked by then) and vectors, so DST's ``/history``
  and ``/.afi/at/…`` show the past too. A version whose validity was ended after the instant
  (superseded or retired since) is open again in DST, as it was then; a text changed in place since
  reads as stored (the source keeps no older one).
  Forgotten notes stay forgotten; notes under legal hold stay with the source, for its auditors.
- the working blocks as they are now (blocks keep no past);
- the snapshots of SRC up to the instant (DST's history is SRC's up to then, so they show the same);
- the workspace files as they stood (what ``/.afi/at/<instant>/files`` shows), written through DST's
  workspace so their notes and index follow (``file`` notes are never copied: they are the files'),
  and SRC's file versions up to the instant (the bytes are kept once, shared).

Ledger sessions stay with SRC: they are a record of what was said in SRC, not state to branch. The
notes, blocks and snapshots go in one transaction; the files, written to disk, are removed again if
the fork fails, so a failed fork leaves DST empty.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING

from afi.errors import Conflict, InvalidPath
from afi.provider import Caller
from afi.storage.database import Database

from .fabric.clock import ended_after
from .fabric.rows import note_from_row
from .fabric.types import MemoryNote
from .horizon import horizon, raise_horizon
from .timeline import KINDS, Progress, contents, missing_space, parse_target, past_instant
from .tree.at_files import files_at
from .tree.file_notes import file_written
from .workspace.ignore import AFIIGNORE

if TYPE_CHECKING:
    from .spaces import Space, Spaces

__all__ = ["ForkResult", "fork_space"]


@dataclass(frozen=True)
class ForkResult:
    source: str
    dest: str
    at: str  # the instant forked, canonical
    versions: int  # note versions copied
    blocks: int
    snapshots: int
    files: int


def fork_space(database: Database, spaces: Spaces, dest: str, source: str, caller: Caller,
               progress: Progress | None = None) -> ForkResult:  # fmt: skip
    """Fork ``source`` (``SPACE[@WHEN]``) into the empty space ``dest``; the caller holds DST's write lock
    and the transaction the notes go in."""
    caller.require("afi:write", path="/")
    target = parse_target(source)
    if target.space == dest:
        raise InvalidPath(f"a space cannot be forked into itself ({dest!r}): name a new space")
    src, dst = spaces.get(target.space), spaces.get(dest)
    at = past_instant(src, target.when)
    missing_space(target, src, database)
    held = contents(database, dst)
    if not held.empty:
        raise Conflict(f"the space {dest!r} is not empty ({held.said()}): fork into a new space")
    versions = _copy_notes(src, dst, at, progress)
    _copy_lineage(src, dst, at)
    blocks = _copy_blocks(src, dst)
    snapshots = [s for s in src.snapshots.list() if s.at <= at]
    for snapshot in snapshots:
        dst.snapshots.create(snapshot.name, snapshot.at)
    files = _copy_files(src, dst, at, progress)
    cut = horizon(database, target.space)
    if cut is not None:  # the copied past is what the source kept: no more exact before its horizon
        with database.transaction() as conn:
            raise_horizon(conn, dest, cut)
    return ForkResult(target.space, dest, at, versions, blocks, len(snapshots), files)


def _copy_notes(src: Space, dst: Space, at: str, progress: Progress | None) -> int:
    from .fabric.vector_bytes import unpack_vector  # with numpy, which the commands that never fork do not load

    memory, into = src.fabric.memory, dst.fabric.memory
    kinds = ", ".join(f"'{k}'" for k in KINDS)
    rows = memory.store.rows_with_embeddings(
        memory.scope, f"kind IN ({kinds}) AND status = 'active' AND created_at <= ?", (at,)
    )
    rows.sort(key=lambda row: int(row[1]))  # by seq: DST's changes come in the order SRC's did
    later = memory.store.select_notes(memory.scope, "created_at > ? AND supersedes IS NOT NULL", (at,))
    superseded_later = {note.supersedes for note in later}
    for done, row in enumerate(rows, 1):
        note = note_from_row(row[:-1], into.scope)
        if _ended_later(note, at, superseded_later):
            note = note.model_copy(update={"valid_to": None})
        into.store.insert_note(into.scope, note, None if row[-1] is None else unpack_vector(row[-1]))
        if progress is not None:
            progress("notes", done, len(rows))
    return len(rows)


def _copy_lineage(src: Space, dst: Space, at: str) -> None:
    """The session entries revoked by then (the notes citing them stay out of DST's recall, as of SRC's)."""
    scope, into = src.fabric.memory.scope, dst.fabric.memory.scope
    with dst.fabric.memory.store.write() as conn:
        rows = conn.execute(
            "SELECT entry_id, status, changed_at FROM source_lineage WHERE tenant_id = ? AND resource_id = ? "
            "AND thread_id = ? AND changed_at <= ?",
            (scope.tenant_id, scope.resource_id, scope.thread_id, at),
        ).fetchall()
        conn.executemany(
            "INSERT INTO source_lineage VALUES (?, ?, ?, ?, ?, ?)",
            [(into.tenant_id, into.resource_id, into.thread_id, *row) for row in rows],
        )


def _ended_later(note: MemoryNote, at: str, superseded_later: set[str | None]) -> bool:
    """Whether the version's validity was ended after ``at`` (superseded or retired since), not known then."""
    return ended_after(note.valid_to, note.updated_at, at, True if note.id in superseded_later else None)


def _copy_blocks(src: Space, dst: Space) -> int:
    value, _ = src.fabric.memory.store.get_working(src.fabric.memory.scope)
    if value:
        into = dst.fabric.memory
        _, version = into.store.get_working(into.scope)  # DST may keep a row whose blocks were all cleared
        into.store.cas_working(into.scope, value, version)
    return len(src.fabric.blocks())


def _copy_files(src: Space, dst: Space, at: str, progress: Progress | None) -> int:
    """The files as they stood at ``at``, written through DST's workspace (its index and ``file`` notes
    follow), and SRC's file versions up to then (their bytes are shared, kept once)."""
    held = files_at(src, at)
    for version in src.files.all_versions():
        if version.at <= at:
            dst.files.add_version(version.path, version.sha256, version.size, version.at, version.op)
    folder = dst.workspace.jail.root
    existed = folder.is_dir()
    try:
        for done, rel in enumerate(sorted(held, key=lambda r: (r != AFIIGNORE, r)), 1):  # the rules first
            sha, where = held[rel].sha256, f"/files/{rel}"
            data = src.files.blob(sha, path=where) if sha else src.workspace.read(rel, where, 0, None)[0]
            if sha is None:  # a file the history never saw: DST's history holds it from when SRC's tree shows it
                dst.files.record_write(rel, data, held[rel].since)
            _, full = dst.workspace.write(rel, where, data, offset=None, append=False, create_only=True)
            file_written(dst, rel, full)
            if progress is not None:
                progress("files", done, len(held))
    except BaseException:
        if folder.is_dir() and not folder.is_symlink():  # DST held no files: remove what this fork wrote
            for child in folder.iterdir() if existed else [folder]:
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        raise
    return len(held)
