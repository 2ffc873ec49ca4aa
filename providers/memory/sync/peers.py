"""Who a store is to its peers, and how far it has applied each peer's changes.

A store names itself with a random 128-bit id (``meta.store_id``, made the first time a sync asks).
Per space and peer, ``sync_peers`` keeps the peer's last change seq this store applied (``received``):
it moves in the transaction that applies the batch, so a sync killed at any moment resumes where the
last committed batch ended and applies nothing twice.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from afi.storage.database import Connection, Database

from ..fabric.rows import iso_now

__all__ = ["Peer", "peers", "received", "record_received", "store_id"]


def store_id(database: Database) -> str:
    """This store's id, made on first use (random). A copy of the store (of its file, or by ``afi db
    copy``) keeps it, with its change numbers: it is the same store, and a sync of the two is refused."""
    with database.read() as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()
    if row is not None:
        return str(row[0])
    with database.transaction() as conn:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('store_id', ?) ON CONFLICT (key) DO NOTHING", (uuid.uuid4().hex,)
        )
        return str(conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()[0])


_STREAMS = {"notes": "received", "files": "received_files", "ledger": "received_ledger"}


def received(conn: Connection, space: str, peer: str, *, stream: str = "notes") -> int:
    """The last change of ``peer`` this store applied to ``space``: its note change seq, for
    ``stream="files"`` its file version id, for ``"ledger"`` its ledger entry seq (0 before the first sync)."""
    column = _STREAMS[stream]
    row = conn.execute(f"SELECT {column} FROM sync_peers WHERE space = ? AND peer = ?", (space, peer)).fetchone()
    return 0 if row is None else int(row[0])


def record_received(conn: Connection, space: str, peer: str, label: str, upto: int, *, stream: str = "notes") -> None:
    """Record, in the caller's transaction, that ``peer``'s changes of ``stream`` up to ``upto`` are
    applied to ``space`` (a position never moves back)."""
    column = _STREAMS[stream]
    conn.execute(
        "INSERT INTO sync_peers (space, peer, label, received, received_files, synced_at) VALUES (?, ?, ?, 0, 0, ?) "
        "ON CONFLICT (space, peer) DO UPDATE SET label = excluded.label, synced_at = excluded.synced_at",
        (space, peer, label, iso_now()),
    )
    conn.execute(
        f"UPDATE sync_peers SET {column} = ? WHERE space = ? AND peer = ? AND {column} < ?", (upto, space, peer, upto)
    )


@dataclass(frozen=True)
class Peer:
    """A store this one has synced a space with: its id, where it was reached, when, and how far."""

    space: str
    peer: str
    label: str
    received: int
    synced_at: str


def peers(database: Database, space: str | None = None) -> list[Peer]:
    """The peers each space (or one) has synced with, most recent first."""
    where, params = ("WHERE space = ?", (space,)) if space is not None else ("", ())
    with database.read() as conn:
        rows = conn.execute(
            f"SELECT space, peer, label, received, synced_at FROM sync_peers {where} ORDER BY synced_at DESC", params
        ).fetchall()
    return [Peer(str(s), str(p), str(lab), int(r), str(at)) for s, p, lab, r, at in rows]
