"""``afi gc --keep-days N``: drop what only the distant past needs, keep every instant of the last N days exact.

With the boundary ``B`` = now − N days, for each space:

- file versions: every row of a path at or before ``B`` but its newest there (the one in effect at
  ``B``) goes; rows after ``B`` stay. So ``/.afi/at/<t>/files`` for any ``t`` ≥ ``B`` is as before,
  and so is the current tree. An older instant shows each path as its oldest kept row says, from
  that row's time on (and the path absent before it).
- blobs no version names any more (in any space) go, and their bytes are counted.
- note versions whose validity ended at or before ``B`` (superseded or expired; never one valid
  since, nor one under legal hold) go, each with a ``delete`` change so every reader's index drops it.
  ``/.afi/at/<t>/facts`` and ``procedures`` for ``t`` ≥ ``B`` stay exact; ``history`` folders list
  the versions kept.
- ``note_changes`` keeps only the newest change of each note. A reader replaying from a seq still
  sees every note changed since it (the newest change of such a note is after that seq) and the
  latest seq, which is all the fabric's readers (vectors, lexical statistics, grep's cache) ask.

A dry run does the same in a transaction it rolls back, so its counts are exact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from afi.errors import InvalidPath
from afi.storage.database import Connection, Database
from afi.storage.engine import Engine

from .fabric.band_rows import unband_rows
from .fabric.rows import INSERT_CHANGE, change_row
from .fabric.types import Scope
from .horizon import raise_horizon

__all__ = ["GcReport", "boundary", "collect_garbage", "gc_spaces"]

Progress = Callable[[str, int, int], None]  # (stage, done, total)
_SCOPE = "tenant_id = 'afi' AND resource_id = ? AND thread_id = 'main'"


@dataclass
class GcReport:
    """What a gc dropped (or, in a dry run, would drop)."""

    keep_days: int
    boundary: str
    dry_run: bool
    spaces: list[str] = field(default_factory=list)
    file_versions: int = 0
    blobs: int = 0
    bytes_freed: int = 0
    note_versions: int = 0
    change_rows: int = 0


class _DryRun(Exception):
    """Raised at the end of a dry run to roll its transaction back."""


def boundary(keep_days: int) -> str:
    """The instant ``keep_days`` days ago (UTC, milliseconds); InvalidPath for a negative or absurd N."""
    if not isinstance(keep_days, int) or isinstance(keep_days, bool) or keep_days < 0:
        raise InvalidPath(f"--keep-days must be 0 or more days, not {keep_days!r}")
    try:
        moment = datetime.now(UTC) - timedelta(days=keep_days)
    except OverflowError:
        raise InvalidPath(f"--keep-days {keep_days} reaches before the year 1") from None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def gc_spaces(database: Database) -> list[str]:
    """Every space holding notes or file versions, by name."""
    with database.read() as conn:
        rows = conn.execute(
            "SELECT resource_id FROM notes WHERE tenant_id = 'afi' AND thread_id = 'main' "
            "UNION SELECT space FROM file_versions"
        ).fetchall()
    return sorted({str(r[0]) for r in rows})


def _file_versions(conn: Connection, space: str, cut: str) -> int:
    kept = (
        "SELECT id FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY path ORDER BY at DESC, id DESC) AS newest "
        "FROM file_versions WHERE space = ? AND at <= ?) AS ranked WHERE newest = 1"
    )
    cur = conn.execute(f"DELETE FROM file_versions WHERE space = ? AND at <= ? AND id NOT IN ({kept})",
                       (space, cut, space, cut))  # fmt: skip
    return max(cur.rowcount, 0)


def _note_versions(conn: Connection, space: str, cut: str) -> int:
    rows = conn.execute(
        f"SELECT id, rowid, content FROM notes WHERE {_SCOPE} AND status <> 'legal_hold' AND valid_to IS NOT NULL "
        "AND valid_to <= ?",
        (space, cut),
    ).fetchall()
    ids = [str(r[0]) for r in rows]
    unband_rows(conn, Scope(tenant_id="afi", resource_id=space, thread_id="main"),
                [(int(rowid), str(text)) for _, rowid, text in rows])  # fmt: skip
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ", ".join("?" * len(chunk))
        conn.execute(f"DELETE FROM notes WHERE {_SCOPE} AND id IN ({marks})", (space, *chunk))
        conn.executemany(INSERT_CHANGE, [change_row(("afi", space, "main"), note_id, "gc") for note_id in chunk])
    return len(ids)


def _compact_changes(conn: Connection, space: str) -> int:
    cur = conn.execute(
        f"DELETE FROM note_changes WHERE {_SCOPE} AND seq NOT IN "
        f"(SELECT MAX(seq) FROM note_changes WHERE {_SCOPE} GROUP BY note_id)",
        (space, space),
    )
    return max(cur.rowcount, 0)


def _blobs(conn: Connection, engine: Engine) -> tuple[int, int]:
    engine.hold_blobs(conn)  # a writer mid-way keeps the blob it names
    gone = conn.execute(
        "DELETE FROM file_blobs WHERE NOT EXISTS (SELECT 1 FROM file_versions v WHERE v.sha256 = file_blobs.sha256) "
        "RETURNING size"
    ).fetchall()
    return len(gone), sum(int(r[0]) for r in gone)


def collect_garbage(database: Database, spaces: Sequence[str], keep_days: int, *, dry_run: bool = False,
                    progress: Progress | None = None) -> GcReport:  # fmt: skip
    """Drop what is older than ``keep_days`` days in each of ``spaces`` (the caller holds their write
    locks); return the counts. InvalidPath for a negative ``keep_days``."""
    report = GcReport(keep_days, boundary(keep_days), dry_run, sorted(spaces))
    if dry_run and database.in_transaction():
        raise RuntimeError("a dry run rolls back a transaction of its own: call it outside any")
    steps = 3 * len(report.spaces) + 1
    done = 0

    def step(stage: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(stage, done, steps)

    try:
        with database.transaction() as conn:
            for space in report.spaces:
                files = _file_versions(conn, space, report.boundary)
                report.file_versions += files
                step(f"{space}: file versions")
                notes = _note_versions(conn, space, report.boundary)
                report.note_versions += notes
                step(f"{space}: note versions")
                if files or notes:  # older instants of this space are no longer exact: refuse them from now on
                    raise_horizon(conn, space, report.boundary)
                report.change_rows += _compact_changes(conn, space)
                step(f"{space}: change log")
            report.blobs, report.bytes_freed = _blobs(conn, database.engine)
            step("blobs")
            if dry_run:
                raise _DryRun
    except _DryRun:
        pass
    return report
