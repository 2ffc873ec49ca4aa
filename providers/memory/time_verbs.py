"""The provider's verbs about time (issue 15): snapshots, diff, open conflicts, gc, fork and restore
(export and import: import_verbs.py).

Mixed into :class:`~.provider.MemoryProvider`, which supplies the store, the spaces, their write
locks and ``_audited`` (lock, audit, run). Each verb here is thin: the work is in the modules it
names (``snapshots``, ``tree/diff``, ``gc``, ``fork``, ``restore``).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from afi.auth.audit import AuditLog
from afi.errors import AfiError, NotFound
from afi.provider import Caller
from afi.storage.database import Database

from .bundle.apply import store_holds_nothing
from .claims import SpaceClaim
from .fork import ForkResult, fork_space
from .gc import GcReport, boundary, collect_garbage, gc_spaces
from .restore import RestorePlan, restore_space
from .snapshots import Snapshot
from .spaces import check_space_name
from .timeline import Progress, space_summaries
from .tree.at import AT_ROOT, instant
from .tree.conflicts import open_conflicts
from .tree.diff import NotesDiff, diff_notes

if TYPE_CHECKING:
    from .spaces import Space, Spaces
    from .workspace.advisory import AdvisorySpaceLocks
    from .workspace.locks import SpaceLocks

__all__ = ["TimeVerbs"]

T = TypeVar("T")


class TimeVerbs:
    """Snapshots, diff, open conflicts, gc, fork and restore of the caller's space."""

    audit: AuditLog
    root: Path
    _db: Database
    _spaces: Spaces
    _write_locks: SpaceLocks | AdvisorySpaceLocks

    if TYPE_CHECKING:

        def _space(self, name: str) -> Space: ...

        def _audited(
            self, caller: Caller, verb: str, path: str, run: Callable[[], T], *, where: str | None = None
        ) -> T: ...

    # -- snapshots: named instants of a space (/.afi/at/<name>/) ---------------------------------

    def snapshot_create(self, caller: Caller, name: str, at: str | None = None) -> Snapshot:
        """Name an instant (``at``, ISO 8601; default now) of the caller's space; needs afi:write, audited."""
        where = f"{AT_ROOT}/{name}"

        def run() -> Snapshot:
            caller.require("afi:write", path=where)
            return self._space(caller.space).snapshots.create(name, None if at is None else instant(at, where))

        return self._audited(caller, "snapshot", where, run)

    def snapshot_list(self, caller: Caller) -> builtins.list[Snapshot]:
        caller.require("afi:read")
        return self._space(caller.space).snapshots.list()

    def snapshot_delete(self, caller: Caller, name: str) -> None:
        """Drop a snapshot of the caller's space (its notes stay); needs afi:write, audited."""
        where = f"{AT_ROOT}/{name}"

        def run() -> None:
            caller.require("afi:write", path=where)
            if not self._space(caller.space).snapshots.delete(name):
                raise NotFound(f"no snapshot named {name!r} in this space", path=where)

        self._audited(caller, "snapshot-delete", where, run)

    def diff(self, caller: Caller, since: str, until: str) -> NotesDiff:
        """What changed in the caller's space's notes between two instants or snapshots (afi:read)."""
        caller.require("afi:read")
        return diff_notes(self._space(caller.space), since, until)

    def open_conflicts(self, caller: Caller) -> builtins.list[dict[str, Any]]:
        """The caller's space's open conflicts (afi:read): each name a sync settled that no write has
        answered yet, with the versions it retired (tree/conflicts.py), by path."""
        caller.require("afi:read")
        return [asdict(found) for found in open_conflicts(self._space(caller.space))]

    def gc(self, caller: Caller, keep_days: int, *, every_space: bool = False, dry_run: bool = False,
           progress: Progress | None = None) -> GcReport:  # fmt: skip
        """Drop versions retired over ``keep_days`` days ago in the caller's space, or every space (gc.py);
        holds their write locks; audited unless a dry run."""
        caller.require("afi:write")
        try:
            boundary(keep_days)  # refused before the locks, whose transaction (PostgreSQL) a refusal rolls back
        except AfiError as err:
            self.audit.record(caller, "gc", "/", err.code)
            raise
        names = gc_spaces(self._db) if every_space else [caller.space]
        run = partial(collect_garbage, self._db, names, keep_days, dry_run=dry_run, progress=progress)
        if dry_run:  # its own transaction, rolled back: no lock, no audit
            return run()
        with ExitStack() as held:
            for name in sorted({*names, caller.space}):
                held.enter_context(self._write_locks.hold(name))
            return self._audited(caller, "gc", "/", run)

    def space_fork(self, caller: Caller, source: str, progress: Progress | None = None) -> ForkResult:
        """Fork ``SPACE[@instant or snapshot]`` into the caller's space, which must hold nothing (fork.py)."""
        run = partial(fork_space, self._db, self._spaces, caller.space, source, caller, progress)
        claim = SpaceClaim(self.root, caller.space)  # files a fork killed mid-way wrote are undone first
        try:
            caller.require("afi:write", path="/")
            check_space_name(caller.space)
            claim.take(partial(store_holds_nothing, self._db, caller.space))
        except AfiError as err:
            self.audit.record(caller, "fork", f"/ <- {source}", err.code)
            raise
        try:
            return self._audited(caller, "fork", f"/ <- {source}", run)
        finally:
            claim.release()

    def space_restore(self, caller: Caller, at: str, *, dry_run: bool = False,
                      progress: Progress | None = None) -> RestorePlan:  # fmt: skip
        """Write the caller's space as it stood at ``at`` as new versions (restore.py); a dry run only says."""
        run = partial(restore_space, self._db, self._space(caller.space), at, caller, dry_run=dry_run,
                      progress=progress)  # fmt: skip
        return run() if dry_run else self._audited(caller, "restore", f"{AT_ROOT}/{at}", run)

    def space_list(self, caller: Caller) -> builtins.list[dict[str, Any]]:
        caller.require("afi:admin")
        return space_summaries(self._db)
