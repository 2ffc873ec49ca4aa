"""The provider's verbs for ``afi export`` and ``afi import``: a space out of the store, and a source into it.

An import is all or nothing, whatever its source: what it writes goes in one transaction (every
space of a bundle together), under the write locks of the spaces it fills and their claims
(claims.py). Files it puts on disk before that transaction ends are staged (a bundle's) or journaled
(a foreign source's files written in place: journal.py), so a refusal, a rollback or a ``kill -9``
leaves the store and its workspace root as they were: a killed import's leftovers are undone by the
next import into the space, or by the next process that opens the store.

Mixed into :class:`~.provider.MemoryProvider`, which supplies the store, the spaces, their write
locks and the audit log.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from afi.auth.audit import AuditLog
from afi.errors import AfiError, Internal
from afi.provider import Caller
from afi.storage.database import Database

from .bundle.apply import Prepared, apply_space, store_holds_nothing
from .bundle.collect import collect_space
from .bundle.model import SpaceData
from .claims import STAGING_PREFIX, SpaceClaim
from .horizon import check_horizon
from .journal import FileJournal, forget_marker, undo
from .spaces import check_space_name

if TYPE_CHECKING:
    from .spaces import Space
    from .workspace.advisory import AdvisorySpaceLocks
    from .workspace.locks import SpaceLocks

__all__ = ["ImportVerbs"]

T = TypeVar("T")


class ImportVerbs:
    """Export a space to a bundle writer; import bundle spaces, or a foreign source's writes, whole."""

    audit: AuditLog
    root: Path
    _db: Database
    _write_locks: SpaceLocks | AdvisorySpaceLocks

    if TYPE_CHECKING:

        def _space(self, name: str) -> Space: ...

    def export_space(self, caller: Caller, as_of: str | None, write: Callable[[SpaceData], None]) -> None:
        """Hand the caller's space (as of an instant) to a bundle writer (bundle/), under its write lock."""
        caller.require("afi:read")
        if as_of is not None:
            check_horizon(self._db, caller.space, as_of, path="--as-of")
        with self._write_locks.hold(caller.space):
            write(collect_space(self._space(caller.space), caller.space, as_of))

    def import_spaces(self, spaces: Sequence[tuple[Caller, Prepared]]) -> None:
        """Write checked bundle spaces, each into its caller's space (which must be empty), in one transaction:
        all of them or none, each audited as ``import``. The callers hold the spaces' claims."""
        callers = [caller for caller, _ in spaces]
        for caller in callers:
            caller.require("afi:write", path="/")

        def run() -> None:
            for caller, prepared in spaces:
                apply_space(self._db, self._space(caller.space), caller.space, self.root, prepared)

        self._one_import(callers, run, None)

    def import_whole(self, caller: Caller, run: Callable[[FileJournal | None], T], *, files: bool) -> T:
        """Run a foreign import's writes (``run``, through the provider's verbs) as one: under the caller's
        space's claim and write lock, in one transaction with an ``import`` audit row. With ``files``,
        ``run`` is handed the journal each file written in place is recorded in first, so a refusal or a
        crash puts the workspace back; return what ``run`` returns.

        Raises:
            Conflict: another import or fork into the space is running.
            AfiError: what ``run`` raised (nothing of the import stays).
        """
        caller.require("afi:write", path="/")
        check_space_name(caller.space)
        claim = SpaceClaim(self.root, caller.space, self._db)
        claim.take(partial(store_holds_nothing, self._db, caller.space))
        journal: FileJournal | None = None
        committed = False
        try:
            if files:
                staging = self.root / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
                claim.note(staging, journaled=True)
                journal = FileJournal(staging, self._space(caller.space).workspace.jail)
            result = self._one_import([caller], partial(run, journal), journal)
            committed = True
            return result
        finally:
            if journal is not None:
                journal.close()
                # the journal goes before the marker: a process killed between the two leaves a claim whose
                # import committed (the marker says so) and nothing to undo; the other way round, the next
                # sweep found a journal and no marker, and put back the files of a committed import
                shutil.rmtree(journal.staging, ignore_errors=True)
                if committed:
                    forget_marker(self._db, journal.marker)
            claim.release()

    def _one_import(self, callers: list[Caller], run: Callable[[], T], journal: FileJournal | None) -> T:
        """Run ``run`` under the callers' spaces' write locks in one transaction with an ``import`` audit row
        each; a refusal is recorded once it has rolled back, after the files in ``journal`` are put back
        (still under the locks)."""
        try:
            with ExitStack() as held:
                for name in sorted({caller.space for caller in callers}):
                    held.enter_context(self._write_locks.hold(name))
                try:
                    with self._db.transaction() as conn:
                        result = run()
                        if journal is not None:
                            journal.mark_committed(conn)  # the marker commits with the import's rows
                        for caller in callers:
                            self.audit.record(caller, "import", "/", "ok")
                except BaseException:
                    if journal is not None:  # the rows rolled back (or will, with the locks' transaction)
                        journal.close()
                        undo(journal.staging, journal.jail)
                    raise
            return result
        except AfiError as err:
            for caller in callers:
                self.audit.record(caller, "import", "/", err.code)
            raise
        except OSError as err:
            for caller in callers:
                self.audit.record(caller, "import", "/", "internal")
            raise Internal(f"the import could not be written: {err.strerror}", path="/") from err
