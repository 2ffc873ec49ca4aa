"""The one numbered list of schema steps, the same number for the same change on both engines.

Each :class:`~.migrations.Step` carries its SQLite form (:mod:`.schema`, :mod:`.lite_steps`) and its PostgreSQL form
(:mod:`.pg_steps`); ``None`` where a change has nothing to do on that engine (the engine's layout
already had it, or it concerns the other engine's way of keeping a thing). Such a step is still
recorded when a store passes it, so both engines' stores record the same list.

Until this list, each engine numbered its own steps (1–10 on both, a number naming a different change
on each). A store made then records those numbers; :func:`renumbered` reads them by their names onto
this list (and records the other engine's steps it skipped), so an older store of either engine
migrates forward from where it stood. A step once released is never edited or renumbered; a new one
is appended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from . import lite_steps as lite
from . import pg_steps as pg
from . import schema
from .migrations import Applied, Step

__all__ = ["LATEST", "OLD_NUMBERS", "STEPS", "WORKSPACE_STEP", "Engine", "renumbered"]

Engine = Literal["sqlite", "postgresql"]

STEPS: tuple[Step, ...] = (
    Step(1, "initial layout", schema.initial_layout, pg.initial_layout),
    # PostgreSQL's initial layout has had the index from the start
    Step(2, "notes by file name", lite.notes_by_file_name, None),
    # pg_trgm's GIN indexes never kept positions
    Step(3, "trigram indexes without positions", lite.trigrams_without_positions, None),
    # a SQLite store has packed half-precision components from the start (fabric.vector_bytes)
    Step(4, "embeddings at half precision", None, pg.half_precision),
    Step(5, "audit by space", lite.audit_by_space, pg.audit_by_space),
    Step(6, "snapshots", lite.snapshots, pg.snapshots),
    Step(7, "file history", lite.file_history, pg.file_history),
    Step(8, "oauth", lite.oauth, pg.oauth),
    # the tsvector and the pgvector column types are PostgreSQL's; FTS5 and BLOBs were compact already
    Step(9, "compact notes", None, pg.compact_notes),
    Step(10, "change stamps", lite.change_stamps, pg.change_stamps),
    # the SQLite store's FTS5 tables keep their own copies of the text (pg_derived_notes says more)
    Step(11, "renderings and lexemes derived", None, pg.derive_notes),
    # a PostgreSQL store has used the per-user workspace whatever its URL: nothing to record
    Step(12, "workspace of older stores", lite.workspace_of_older_stores, None),
    Step(13, "workspace charged bytes", lite.workspace_charged, pg.workspace_charged),
    Step(14, "sync", lite.sync, pg.sync),
    Step(15, "sync ledger and snapshots", lite.sync_ledger, pg.sync_ledger),
    Step(16, "workspace folders", lite.workspace_folders, pg.workspace_folders),
    Step(17, "vectors after writes", lite.vectors_after_writes, pg.vectors_after_writes),
    Step(18, "fold bands", lite.fold_bands, pg.fold_bands),
    Step(19, "fold bags", lite.fold_bags, pg.fold_bags),
)
LATEST = len(STEPS)
WORKSPACE_STEP = 12  # from this step on, a SQLite store records the per-user workspace it used before

# what each engine's own numbers meant before this list: old number -> the step here
OLD_NUMBERS: dict[Engine, dict[int, int]] = {
    "sqlite": {1: 1, 2: 2, 3: 3, 4: 5, 5: 6, 6: 7, 7: 8, 8: 10, 9: 12, 10: 13},
    "postgresql": {1: 1, 2: 4, 3: 5, 4: 6, 5: 7, 6: 8, 7: 9, 8: 10, 9: 11, 10: 13},
}
_BY_NAME = {step.name: step.number for step in STEPS}


def renumbered(recorded: Sequence[Applied], *, at: str) -> list[Applied] | None:
    """Given the steps a store records, return them on this list when they are an engine's old
    numbering (each row by its name, with the steps it skipped, those of the other engine, recorded
    as passed ``at``), or None when the store records this list already (or nothing).

    A row whose name is not on this list (a newer afi-memory's step) leaves the rows as they are.
    """
    if all(row.number > LATEST or STEPS[row.number - 1].name == row.name for row in recorded):
        return None
    if any(row.name not in _BY_NAME for row in recorded):
        return None
    moved = {_BY_NAME[row.name]: Applied(_BY_NAME[row.name], row.name, row.applied_at) for row in recorded}
    top = max(moved)
    return [moved.get(step.number) or Applied(step.number, step.name, at) for step in STEPS[:top]]
