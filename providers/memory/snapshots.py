"""Snapshots: named instants of a space, so ``/.afi/at/<name>/`` shows the notes as they stood then.

A snapshot is a name and an instant, nothing more: the past it names is the notes' own versions and
validity windows (:mod:`.tree.at`), so taking one copies nothing and costs one row. A name starts
with a letter (so it is never read as an ISO 8601 instant) and is unique within its space.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from afi.errors import Conflict, InvalidPath
from afi.storage.database import Database

from .fabric.clock import scope_now
from .fabric.rows import iso_now
from .fabric.types import Scope

__all__ = ["SNAPSHOT_NAME", "Snapshot", "Snapshots"]

SNAPSHOT_NAME = re.compile(r"^[a-z][a-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Snapshot:
    name: str
    at: str  # the instant it names, UTC with milliseconds
    created_at: str


def check_snapshot_name(name: str) -> str:
    if not SNAPSHOT_NAME.match(name):
        raise InvalidPath(
            f"invalid snapshot name {name!r}: a letter, then up to 63 of [a-z0-9._-] (so it never reads as an instant)"
        )
    return name


class Snapshots:
    """One space's snapshots, read from the store on each ask (any process may have taken one)."""

    def __init__(self, database: Database, space: str) -> None:
        self._db = database
        self.space = space

    def create(self, name: str, at: str | None = None) -> Snapshot:
        """Name the instant ``at`` (canonical; default now). Conflict when the name is taken."""
        present = scope_now(self._db, Scope(tenant_id="afi", resource_id=self.space, thread_id="main"))
        snapshot = Snapshot(check_snapshot_name(name), at or present, present)
        if snapshot.at > snapshot.created_at:  # a future instant's view would keep changing
            raise InvalidPath(f"a snapshot names a past instant, and {snapshot.at} is still to come")
        with self._db.transaction() as conn:
            taken = conn.execute(
                "SELECT 1 FROM snapshots WHERE space = ? AND name = ?", (self.space, snapshot.name)
            ).fetchone()
            if taken is not None:
                raise Conflict(f"a snapshot named {name!r} exists: delete it first, or pick another name")
            conn.execute(
                "INSERT INTO snapshots (space, name, at, created_at) VALUES (?, ?, ?, ?)",
                (self.space, snapshot.name, snapshot.at, snapshot.created_at),
            )
        return snapshot

    def get(self, name: str) -> Snapshot | None:
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT name, at, created_at FROM snapshots WHERE space = ? AND name = ?", (self.space, name)
            ).fetchone()
        return None if row is None else Snapshot(str(row[0]), str(row[1]), str(row[2]))

    def list(self) -> list[Snapshot]:
        """Every snapshot of the space, by name."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT name, at, created_at FROM snapshots WHERE space = ? ORDER BY name", (self.space,)
            ).fetchall()
        return [Snapshot(str(n), str(a), str(c)) for n, a, c in rows]

    def delete(self, name: str) -> bool:
        """Drop a snapshot (the notes it showed stay as they are); False when there was none."""
        with self._db.transaction() as conn:
            gone = conn.execute("DELETE FROM snapshots WHERE space = ? AND name = ? RETURNING at, created_at",
                                (self.space, name)).fetchone()  # fmt: skip
            if gone is not None:  # kept, so a sync does not bring a peer's copy back
                conn.execute(
                    "INSERT INTO snapshot_drops (space, name, at, created_at, dropped_at) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (space, name, at, created_at) DO NOTHING",
                    (self.space, name, gone[0], gone[1], iso_now()),
                )
        return gone is not None
