"""How far back a space's past is exact: the boundary of the last ``afi gc`` that dropped any of it.

``afi gc --keep-days N`` keeps every instant from its boundary on exact and drops what only older
instants need, so an older instant would come back wrong without a word: files changed since would
look absent, notes retired since would look missing, and a restore to it would undo today. The
boundary is kept per space in the store's ``meta`` table (``gc_horizon:<space>``, copied by ``afi db
copy`` with the rest of ``meta``), written in gc's own transaction, and an instant before it is
refused wherever one is named (``/.afi/at/<instant>``, snapshots, diff, fork, restore, export).
"""

from __future__ import annotations

from afi.errors import InvalidPath
from afi.storage.database import Connection, Database

__all__ = ["check_horizon", "horizon", "raise_horizon"]


def _key(space: str) -> str:
    return f"gc_horizon:{space}"


def horizon(database: Database, space: str) -> str | None:
    """The instant before which ``space``'s past is no longer exact, or None when gc never cut it."""
    with database.read() as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (_key(space),)).fetchone()
    return None if row is None else str(row[0])


def raise_horizon(conn: Connection, space: str, boundary: str) -> None:
    """Move ``space``'s horizon up to ``boundary`` (never back), in the caller's transaction."""
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value WHERE meta.value < excluded.value",
        (_key(space), boundary),
    )


def check_horizon(database: Database, space: str, at: str, *, path: str | None = None) -> str:
    """Return ``at`` when the space's past is exact there; InvalidPath naming the horizon when not."""
    cut = horizon(database, space)
    if cut is not None and at < cut:
        raise InvalidPath(
            f"the store keeps no exact past of this space before {cut} (afi gc dropped what older "
            f"instants need); name {cut} or later",
            path=path,
        )
    return at
