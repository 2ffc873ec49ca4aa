"""SSH public keys as principals, kept beside the API keys (table ``afi_ssh_keys`` in the store).

A key is either its own principal (``ssh_<hex>``, with a space and scopes) or attached to an API
key (``principal=key_…``): then it acts as that key, with its space and scopes, and stops working
when that key is revoked. Only public keys and their SHA256 fingerprints are stored.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidPath
from ..provider import Caller
from ..storage.database import open_database
from .authorized_keys import fingerprint, parse_key_line
from .keys import KeyStore, _now

__all__ = ["SshKeyRecord", "SshKeyStore"]


@dataclass(frozen=True)
class SshKeyRecord:
    """One SSH key as listed: its fingerprint and who it acts as."""

    id: str
    fingerprint: str
    space: str
    scopes: tuple[str, ...]
    principal: str
    name: str | None
    created_at: str
    revoked_at: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class SshKeyStore:
    """Given the store (a SQLite file path or a ``postgresql://`` URL), add, verify, list and revoke SSH
    public keys.

    Args:
        db: the store, as ``--db`` names it.
        busy_timeout_ms: how long a SQLite writer waits for another (PostgreSQL ignores it).
    """

    def __init__(self, db: Path | str, *, busy_timeout_ms: int = 5000) -> None:
        self.db = str(db)
        self._db = open_database(db, busy_timeout_ms=busy_timeout_ms)
        self._api = KeyStore(db, busy_timeout_ms=busy_timeout_ms)

    def add(
        self,
        public_key: str,
        *,
        space: str = "default",
        scopes: tuple[str, ...] | list[str] = ("afi:read",),
        name: str | None = None,
        api_key: str | None = None,
    ) -> SshKeyRecord:
        """Given an OpenSSH public-key line, store it as a principal; return its record.

        Of two callers adding the same key at once (threads, processes, or two machines on one
        PostgreSQL), one adds it and the other is told it was already added. A key added before and
        revoked since is added again, as a new grant (the revoked one stays listed).

        Args:
            api_key: attach to this API key id instead: the key then acts as that principal.

        Raises:
            InvalidPath: not a key line, a key already added (and active), an unknown or revoked
                API key, or (as :meth:`KeyStore.create` checks) bad scopes or space.
        """
        try:
            key = parse_key_line(public_key)
        except InvalidPath as err:
            raise InvalidPath(err.message) from None
        if api_key is not None:
            owner = next((r for r in self._api.list() if r.id == api_key and r.active), None)
            if owner is None:
                raise InvalidPath(f"no active API key has the id {api_key!r} (see afi token list)")
            space, scopes = owner.space, owner.scopes
        else:
            _validate(space, tuple(scopes))
        record_id = "ssh_" + secrets.token_hex(6)
        created = _now()
        with self._db.transaction() as conn:
            # A revoked key may come back as a new grant: its old row keeps its history under a
            # fingerprint no presented key has (a space never occurs in one), so the new row is unique.
            conn.execute(
                "UPDATE afi_ssh_keys SET fingerprint = fingerprint || ' revoked ' || id"
                " WHERE fingerprint = ? AND revoked_at IS NOT NULL",
                (key.fingerprint,),
            )
            # ON CONFLICT, not a caught IntegrityError: on PostgreSQL a failed statement aborts the transaction
            added = conn.execute(
                "INSERT INTO afi_ssh_keys (id, name, fingerprint, public_key, space, scopes, api_key, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (fingerprint) DO NOTHING RETURNING id",
                (
                    record_id,
                    name or key.comment or None,
                    key.fingerprint,
                    key.openssh(),
                    None if api_key else space,
                    None if api_key else " ".join(dict.fromkeys(scopes)),
                    api_key,
                    created,
                ),
            ).fetchall()
            if not added:
                found = conn.execute("SELECT id FROM afi_ssh_keys WHERE fingerprint = ?", (key.fingerprint,)).fetchone()
                added_as = f" as {found[0]}" if found is not None else ""
                raise InvalidPath(f"this key ({key.fingerprint}) was already added{added_as}")
        return next(r for r in self.list() if r.id == record_id)

    def verify(self, blob: bytes) -> Caller | None:
        """Given a presented key's wire blob, return its caller, or ``None`` (unknown, revoked, orphaned)."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT s.id, s.space, s.scopes, s.api_key, k.space, k.scopes FROM afi_ssh_keys s"
                " LEFT JOIN afi_keys k ON k.id = s.api_key AND k.revoked_at IS NULL"
                " WHERE s.fingerprint = ? AND s.revoked_at IS NULL",
                (fingerprint(blob),),
            ).fetchone()
        if row is None:
            return None
        if row[3] is not None:
            if row[4] is None:
                return None  # the API key it acts as was revoked
            return Caller(principal=row[3], space=row[4], scopes=frozenset(row[5].split()))
        return Caller(principal=row[0], space=row[1], scopes=frozenset(row[2].split()))

    def list(self) -> list[SshKeyRecord]:
        """Return every SSH key, revoked ones included, oldest first."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT s.id, s.fingerprint, COALESCE(s.space, k.space, ''), COALESCE(s.scopes, k.scopes, ''),"
                " COALESCE(s.api_key, s.id), s.name, s.created_at, s.revoked_at"
                " FROM afi_ssh_keys s LEFT JOIN afi_keys k ON k.id = s.api_key ORDER BY s.rowid"
            ).fetchall()
        return [
            SshKeyRecord(r[0], r[1].split(" ", 1)[0], r[2], tuple(r[3].split()), r[4], r[5], r[6], r[7]) for r in rows
        ]

    def revoke(self, key_id: str) -> bool:
        """Given an SSH key id, revoke it; return False when no active key has that id."""
        with self._db.transaction() as conn:
            cur = conn.execute(
                "UPDATE afi_ssh_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (_now(), key_id)
            )
        return cur.rowcount == 1

    def count(self, *, revoked: bool = False) -> int:
        """Return how many SSH keys are active (with ``revoked``, how many were ever added)."""
        where = "" if revoked else " WHERE revoked_at IS NULL"
        with self._db.read() as conn:
            return int(conn.execute("SELECT count(*) FROM afi_ssh_keys" + where).fetchone()[0])


def _validate(space: str, scopes: tuple[str, ...]) -> None:
    from ..provider import SCOPES
    from .keys import _SPACE

    if not scopes:
        raise InvalidPath(f"a key needs at least one scope (one of {', '.join(SCOPES)})")
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown:
        raise InvalidPath(f"unknown scope {unknown[0]!r}: the scopes are {', '.join(SCOPES)}")
    if not _SPACE.match(space):
        raise InvalidPath(f"bad space name {space!r}")
