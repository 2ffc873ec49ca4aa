"""``afi space restore SPACE@WHEN``: the space's notes and files as they stood then, written as new versions.

Nothing of the present is lost: a fact or procedure that says something else today than it did then
gets the old version back as a new one superseding today's (the fabric's own ``remember``, so
``supersedes`` and ``/history`` tell the story); one written since is retired (its validity ends now;
it stays in ``/history``); one gone since (expired or superseded away) comes back as a new version.
Workspace files get their bytes of then back (what ``/.afi/at/<instant>/files`` shows), and files
written since are deleted, through the ``/files`` verbs, so the file history keeps today's bytes.
Working blocks keep no past and are left as they are. Restoring again changes nothing: versions are
compared by what they say (:func:`.tree.diff.belief`), not by id.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from afi.errors import InvalidPath
from afi.provider import Caller
from afi.storage.database import Database

from .fabric.clock import retire_at
from .fabric.types import MemoryNote
from .timeline import Progress, notes_at, past_instant
from .tree.at_files import files_at
from .tree.base import WriteOptions
from .tree.diff import belief
from .tree.file_history import digest_now
from .tree.files import FilesArea
from .tree.locate import Node, locate, note_path
from .workspace.ignore import AFIIGNORE

if TYPE_CHECKING:
    from .spaces import Space

__all__ = ["RestorePlan", "restore_space"]

_REMEMBERED = ("t_ref", "tags", "keywords", "context", "importance", "source_entry_ids", "consent")


@dataclass
class RestorePlan:
    """What a restore changes (a dry run's answer) or changed: note paths and workspace paths."""

    space: str
    at: str
    brought_back: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    files_written: list[str] = field(default_factory=list)
    files_deleted: list[str] = field(default_factory=list)
    applied: bool = False

    @property
    def empty(self) -> bool:
        return not (self.brought_back or self.changed or self.retired or self.files_written or self.files_deleted)


def restore_space(database: Database, space: Space, when: str, caller: Caller, *, dry_run: bool = False,
                  progress: Progress | None = None) -> RestorePlan:  # fmt: skip
    """Bring the caller's space back to ``when`` (an instant or a snapshot), or with ``dry_run`` say what
    that would change; the caller holds the space's write lock and transaction for a real one."""
    caller.require("afi:read" if dry_run else "afi:write", path="/")
    if not when:
        raise InvalidPath("name the instant to restore: SPACE@<ISO 8601 instant or snapshot name>")
    at = past_instant(space, when)
    memory = space.fabric.memory
    # a real restore reads "now" holding the space's lock (on PostgreSQL: its writers take turns)
    with contextlib.nullcontext() if dry_run else memory.store.write(memory.scope):
        present = memory.present()
        then, now = notes_at(space, at), notes_at(space, None)  # None: at the present
        plan = RestorePlan(space.workspace.space, at)
        for key in sorted(then.keys() | now.keys()):
            was, current = then.get(key), now.get(key)
            path = note_path(*key)
            if current is None:
                plan.brought_back.append(path)
            elif was is None:
                plan.retired.append(path)
            elif belief(was) != belief(current):
                plan.changed.append(path)
        today = _files_now(space)
        files = {rel: held.sha256 or today.get(rel) for rel, held in files_at(space, at).items()}
        plan.files_written = sorted((r for r in files if today.get(r) != files[r]), key=lambda r: (r != AFIIGNORE, r))
        plan.files_deleted = sorted(r for r in today if r not in files)
        if not dry_run:
            _check_bytes(space, plan, files)
            _apply(space, plan, then, now, files, present, progress)
            plan.applied = True
    return plan


def _check_bytes(space: Space, plan: RestorePlan, files: dict[str, str | None]) -> None:
    """TooLarge or NotFound, naming the file, when a version to write back keeps no bytes (over the
    history's size cap): refused before anything is written, not half-way."""
    needed = {rel: str(files[rel]) for rel in plan.files_written}
    kept = space.files.kept_blobs(needed.values())
    for rel, sha in needed.items():
        if sha not in kept:
            space.files.blob(sha, path=f"/files/{rel}")  # raises, saying why its bytes are not there


def _files_now(space: Space) -> dict[str, str]:
    """path → digest of every workspace file now (as its kept version would record it)."""
    if not space.workspace.jail.root.is_dir():
        return {}
    out: dict[str, str] = {}
    for rel, _ in space.workspace.index.walk(""):
        digest = digest_now(space, rel)
        if digest is not None:
            out[rel] = digest
    return out


def _apply(space: Space, plan: RestorePlan, then: dict[tuple[str, str], MemoryNote],
           now: dict[tuple[str, str], MemoryNote], files: dict[str, str | None], present: str,
           progress: Progress | None) -> None:  # fmt: skip
    fabric, memory = space.fabric, space.fabric.memory
    by_path = {note_path(*key): key for key in then.keys() | now.keys()}
    total = len(plan.retired) + len(plan.changed) + len(plan.brought_back)
    done = 0
    for path in plan.retired:  # first, so a name renamed away and back is free again
        ending = now[by_path[path]]
        cut = retire_at(present, ending.valid_from)
        memory.store.update_note(memory.scope, ending.model_copy(update={"valid_to": cut, "updated_at": present}))
        done += 1
        _tell(progress, "notes", done, total)
    for path in plan.changed + plan.brought_back:
        was = then[by_path[path]]
        current = now.get(by_path[path])
        fabric.remember(kind=was.kind, name=was.name, content=was.content, consolidate=False,
                        supersedes=(current or was).id, **_fields(was, present))  # fmt: skip
        done += 1
        _tell(progress, "notes", done, total)
    changes = len(plan.files_written) + len(plan.files_deleted)
    area = FilesArea()  # through the /files verbs: the index, the notes and the file history follow
    for i, rel in enumerate(plan.files_written, 1):
        node = _node(rel)
        data = space.files.blob(str(files[rel]), path=node.path)
        area.write(space, node, data, WriteOptions())
        _tell(progress, "files", i, changes)
    for i, rel in enumerate(plan.files_deleted, len(plan.files_written) + 1):
        area.delete(space, _node(rel), recursive=False)
        _tell(progress, "files", i, changes)


def _node(rel: str) -> Node:
    node = locate(f"/files/{rel}")
    assert node is not None  # a workspace path always lands in /files
    return node


def _fields(note: MemoryNote, present: str) -> dict[str, Any]:
    """The annotations of a version as ``remember`` takes them (its validity window starts now; an end
    still to come is kept)."""
    fields = {key: getattr(note, key) for key in _REMEMBERED if getattr(note, key) not in (None, [])}
    if note.links:
        fields["links"] = [link.model_dump(exclude_none=True) for link in note.links]
    if note.valid_to is not None and note.valid_to > present:
        fields["valid_to"] = note.valid_to
    return fields


def _tell(progress: Progress | None, stage: str, done: int, total: int) -> None:
    if progress is not None:
        progress(stage, done, total)
