"""API keys: principals bound to one space, holding scopes; only a SHA-256 of each token is kept.

The keys live in the store (a SQLite file or a PostgreSQL database, see :mod:`afi.storage.database`),
in their own table ``afi_keys``. A token looks like ``afi_<43 url-safe characters>`` and is shown once,
when created. On SQLite, WAL mode, a busy timeout and one connection per thread let a server, a mount
and the CLI share the file; on PostgreSQL, every process (and replica) shares the database.
"""

from __future__ import annotations

import functools
import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidPath, Unauthorized
from ..provider import SCOPES, Caller
from ..storage.database import open_database
from .owner import OwnerCredential, owner_token_path

if TYPE_CHECKING:
    from .oauth.bearer import Bearers
    from .oauth.issuer import IssuerVerifier

__all__ = ["LOCAL_OWNER", "TOKEN_PREFIX", "KeyRecord", "KeyStore"]

TOKEN_PREFIX = "afi_"
LOCAL_OWNER = Caller(principal="local", space="default", scopes=frozenset(SCOPES))
_SPACE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class KeyRecord:
    """One API key as listed: never the token, only who it is and what it may do."""

    id: str
    space: str
    scopes: tuple[str, ...]
    name: str | None
    created_at: str
    revoked_at: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class KeyStore:
    """Given the store (a SQLite file path or a ``postgresql://`` URL), create, verify, list and revoke API keys.

    Args:
        db: the store, as ``--db`` names it.
        busy_timeout_ms: how long a SQLite writer waits for another (PostgreSQL ignores it).
        issuer: an external identity provider whose JWT access tokens are accepted too (``afi serve --issuer``).
    """

    def __init__(self, db: Path | str, *, busy_timeout_ms: int = 5000, issuer: IssuerVerifier | None = None) -> None:
        self.db = str(db)
        self._db = open_database(db, busy_timeout_ms=busy_timeout_ms)
        self.owner = OwnerCredential(owner_token_path(db))
        self._issuer = issuer

    @functools.cached_property
    def bearers(self) -> Bearers:
        """The OAuth access tokens, and the issuer's JWTs; the OAuth modules load when a token is first
        checked (a local command checks none)."""
        from .oauth.bearer import Bearers

        return Bearers(self._db, self._issuer)

    def create(
        self, *, space: str = "default", scopes: tuple[str, ...] | list[str] = ("afi:read",), name: str | None = None
    ) -> tuple[KeyRecord, str]:
        """Given a space, scopes and an optional name, store a new key; return it and its token.

        The token is returned only here; the store keeps its SHA-256.

        Raises:
            InvalidPath: an unknown scope, no scope, or a malformed space name.
        """
        wanted = tuple(dict.fromkeys(scopes))
        if not wanted:
            raise InvalidPath(f"a key needs at least one scope (one of {', '.join(SCOPES)})")
        unknown = [scope for scope in wanted if scope not in SCOPES]
        if unknown:
            raise InvalidPath(f"unknown scope {unknown[0]!r}: the scopes are {', '.join(SCOPES)}")
        if not _SPACE.match(space):
            raise InvalidPath(
                f"bad space name {space!r}: 1 to 64 lower-case letters, digits, '.', '_' or '-', "
                "starting with a letter or digit"
            )
        if name is not None and len(name) > 200:
            raise InvalidPath("a key name is at most 200 characters")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = KeyRecord(id="key_" + secrets.token_hex(6), space=space, scopes=wanted, name=name, created_at=_now())
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO afi_keys (id, name, space, scopes, token_sha256, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (record.id, name, space, " ".join(wanted), _digest(token), record.created_at),
            )
        return record, token

    def verify(self, token: str) -> Caller | None:
        """Given a bearer token, return its caller, or ``None`` when it is unknown or revoked."""
        if not token.startswith(TOKEN_PREFIX):
            return None
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT id, space, scopes FROM afi_keys WHERE token_sha256 = ? AND revoked_at IS NULL",
                (_digest(token),),
            ).fetchone()
        if row is None:
            return None
        return Caller(principal=row[0], space=row[1], scopes=frozenset(row[2].split()))

    def authenticate(self, token: str | None) -> Caller:
        """Given a bearer token or ``None``, return the caller.

        Until the first key is issued, a missing token is the local owner (all scopes, space
        ``default``); from then on a token is required, even after every key is revoked (revoking a
        compromised only key must close the server, not open it). The owner's token (:mod:`.owner`,
        ``afi auth token``) is the local owner whatever keys exist. An OAuth access token or an
        issuer's JWT (:mod:`.oauth.bearer`) is its grant's or its claims' caller.

        Raises:
            Unauthorized: the token is missing where one is required, unknown, revoked, or expired.
        """
        if token is None or token == "":
            if self.keyless():
                return LOCAL_OWNER
            raise Unauthorized(
                "this server requires an API key: send 'Authorization: Bearer <token>' "
                "(the store's owner on this machine: Bearer $(afi auth token))"
            )
        if self.owner.matches(token):
            return LOCAL_OWNER
        caller = self.verify(token) or self.bearers.caller(token)
        if caller is None:
            raise Unauthorized("the API key is unknown or revoked")
        return caller

    def list(self) -> list[KeyRecord]:
        """Return every key, revoked ones included, oldest first."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT id, space, scopes, name, created_at, revoked_at FROM afi_keys ORDER BY rowid"
            ).fetchall()
        return [KeyRecord(r[0], r[1], tuple(r[2].split()), r[3], r[4], r[5]) for r in rows]

    def revoke(self, key_id: str) -> bool:
        """Given a key id, revoke it; return False when no active key has that id."""
        with self._db.transaction() as conn:
            cur = conn.execute(
                "UPDATE afi_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (_now(), key_id)
            )
        return cur.rowcount == 1

    def keyless(self) -> bool:
        """True while no key was ever issued (nor an OAuth client approved, nor an issuer configured):
        only then is a request without a token the local owner."""
        return self.count(revoked=True) == 0 and not self.bearers.required()

    def count(self, *, revoked: bool = False) -> int:
        """Return how many keys are active (with ``revoked``, how many were ever issued)."""
        where = "" if revoked else " WHERE revoked_at IS NULL"
        with self._db.read() as conn:
            row = conn.execute("SELECT count(*) FROM afi_keys" + where).fetchone()
        return int(row[0])

    def close(self) -> None:
        """Close this thread's SQLite connection (each other thread's closes when that thread ends).

        On PostgreSQL a thread holds no connection between statements, and the pool is the whole
        process's, so there is nothing of this store's own to close.
        """
        self._db.engine.release(self._db)
