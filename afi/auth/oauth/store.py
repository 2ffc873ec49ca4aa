"""The built-in authorization server's state, in the store (tables ``oauth_clients``, ``oauth_grants``,
``oauth_tokens``; schema step 8).

A **client** is what registered (RFC 7591), kept as its registration JSON with its secret's SHA-256
in place of the secret (or, for a client known by its metadata document, that document's fields).
A **grant** is the owner's approval: one client, one space, scopes, and the resource (RFC 8707)
every token of it is bound to.
Every secret is kept as its SHA-256 only, in ``oauth_tokens``, with its kind: a pending consent
``request`` (no grant yet), a single-use authorization ``code``, an ``access`` token, a ``refresh``
token (single use: rotated at each refresh). Revoking a grant ends all of its tokens at once.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from ...errors import Unauthorized
from ...provider import Caller
from ...storage.database import Database

__all__ = [
    "ACCESS_PREFIX",
    "ACCESS_SECONDS",
    "REFRESH_PREFIX",
    "Grant",
    "OAuthStore",
    "Secret",
    "digest",
]

ACCESS_PREFIX = "afi_oat_"
REFRESH_PREFIX = "afi_ort_"
CODE_PREFIX = "afi_oac_"
ACCESS_SECONDS = 3600
REFRESH_SECONDS = 30 * 24 * 3600
CODE_SECONDS = 300
REQUEST_SECONDS = 900
MAX_CLIENTS = 10_000
UNUSED_CLIENT_SECONDS = 24 * 3600

Kind = Literal["request", "code", "access", "refresh"]


def digest(secret: str) -> str:
    """The SHA-256 a secret is kept as."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _secret_digest(secret: Any) -> str | None:
    """The SHA-256 of a client secret kept in plain text, or None when it is no secret (null, empty)."""
    return digest(secret) if isinstance(secret, str) and secret else None


def _ago(seconds: float) -> str:
    """The instant ``seconds`` ago, as the table's times are written."""
    return datetime.fromtimestamp(time.time() - seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Grant:
    """One approval by the owner, as listed (``afi token clients``)."""

    id: str
    client_id: str
    client_name: str
    redirect_uris: tuple[str, ...]
    space: str
    scopes: tuple[str, ...]
    resource: str
    approved_by: str
    created_at: str
    revoked_at: str | None

    def caller(self) -> Caller:
        """The caller its tokens stand for: the grant as principal, its space and scopes, its resource."""
        return Caller(principal=self.id, space=self.space, scopes=frozenset(self.scopes), resource=self.resource)


@dataclass(frozen=True)
class Secret:
    """One stored secret: its kind, grant (none for a pending request), client, expiry and data."""

    kind: Kind
    grant_id: str | None
    client_id: str
    expires_at: int
    used_at: str | None
    data: dict[str, Any]


_GRANT_COLUMNS = "g.id, g.client_id, c.info, g.space, g.scopes, g.resource, g.approved_by, g.created_at, g.revoked_at"


def _grant(row: Any) -> Grant:
    info = json.loads(row[2]) if row[2] else {}
    uris = tuple(str(u) for u in info.get("redirect_uris") or ())
    return Grant(row[0], row[1], str(info.get("client_name") or ""), uris, row[3], tuple(row[4].split()),
                 row[5], row[6], row[7], row[8])  # fmt: skip


class OAuthStore:
    """Given the store's database, keep and look up clients, grants and secrets (synchronous: callers
    on an event loop run it in a worker thread)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    # -- clients -----------------------------------------------------------------------------

    def add_client(self, client_id: str, info: dict[str, Any]) -> bool:
        """Keep a registered client; first drop the never-approved ones older than a day. At
        :data:`MAX_CLIENTS`, the oldest never-approved client registered over a consent's lifetime ago
        and with no consent pending makes room, so a flood of registrations cannot lock real clients
        out for a day; False (refused) only when no client can make room."""
        cutoff = _ago(UNUSED_CLIENT_SECONDS)
        # never approved, and no consent pending now (a request lives REQUEST_SECONDS from /authorize)
        unused = (
            "client_id NOT IN (SELECT client_id FROM oauth_grants) AND client_id NOT IN "
            "(SELECT client_id FROM oauth_tokens WHERE kind = 'request' AND used_at IS NULL AND expires_at > ?)"
        )
        now = int(time.time())
        with self._db.transaction() as conn:
            conn.execute(f"DELETE FROM oauth_clients WHERE created_at < ? AND {unused}", (cutoff, now))
            count = int(conn.execute("SELECT count(*) FROM oauth_clients").fetchone()[0])
            if count >= MAX_CLIENTS:
                oldest = conn.execute(
                    f"SELECT client_id FROM oauth_clients WHERE created_at < ? AND {unused} "
                    "ORDER BY created_at LIMIT ?",
                    (_ago(REQUEST_SECONDS), now, count - MAX_CLIENTS + 1),
                ).fetchall()
                if len(oldest) < count - MAX_CLIENTS + 1:
                    return False
                conn.executemany("DELETE FROM oauth_clients WHERE client_id = ?", [(row[0],) for row in oldest])
            conn.execute(
                "INSERT INTO oauth_clients (client_id, info, created_at) VALUES (?, ?, ?)",
                (client_id, json.dumps(info, sort_keys=True), _now()),
            )
        return True

    def client(self, client_id: str) -> dict[str, Any] | None:
        """A registered client's registration JSON, or None."""
        with self._db.read() as conn:
            row = conn.execute("SELECT info FROM oauth_clients WHERE client_id = ?", (client_id,)).fetchone()
        return json.loads(row[0]) if row is not None else None

    def keep_client(self, client_id: str, info: dict[str, Any]) -> None:
        """Keep (or refresh) the record of a client the owner approves that did not register: one known
        by its metadata document, so it is listed (``afi token clients``) beside its grants."""
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO oauth_clients (client_id, info, created_at) VALUES (?, ?, ?) "
                "ON CONFLICT (client_id) DO UPDATE SET info = excluded.info",
                (client_id, json.dumps(info, sort_keys=True), _now()),
            )

    def client_secret_digest(self, client_id: str) -> str | None:
        """The SHA-256 of a client's secret, or None when it has none. A record kept before secrets were
        hashed (its ``client_secret`` in plain text) is rewritten with the digest here."""
        info = self.client(client_id)
        if info is None:
            return None
        if "client_secret" in info:
            self.hash_client_secrets()
            return _secret_digest(info["client_secret"])
        kept = info.get("client_secret_sha256")
        return str(kept) if kept else None

    def hash_client_secrets(self) -> int:
        """Replace every client secret kept in plain text (records of older versions) by its SHA-256;
        return how many records changed."""
        changed = 0
        with self._db.transaction() as conn:
            rows = conn.execute(
                "SELECT client_id, info FROM oauth_clients WHERE info LIKE ?", ('%"client_secret":%',)
            ).fetchall()
            for client_id, text in rows:
                info = json.loads(text)
                if "client_secret" not in info:
                    continue
                hashed = _secret_digest(info.pop("client_secret"))
                if hashed is not None:  # a null or empty secret is no secret, not the text "None"
                    info["client_secret_sha256"] = hashed
                conn.execute(
                    "UPDATE oauth_clients SET info = ? WHERE client_id = ?",
                    (json.dumps(info, sort_keys=True), client_id),
                )
                changed += 1
        return changed

    # -- grants ------------------------------------------------------------------------------

    def add_grant(self, client_id: str, space: str, scopes: list[str], resource: str, approved_by: str) -> str:
        """Record the owner's approval; return the grant's id.

        Raises:
            ValueError: the client is no longer registered (nothing is granted to a client that is gone).
        """
        grant_id = "grant_" + secrets.token_hex(6)
        with self._db.transaction() as conn:
            added = conn.execute(
                "INSERT INTO oauth_grants (id, client_id, space, scopes, resource, approved_by, created_at) "
                "SELECT ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM oauth_clients WHERE client_id = ?)",
                (grant_id, client_id, space, " ".join(scopes), resource, approved_by, _now(), client_id),
            ).rowcount
        if added != 1:
            raise ValueError("this client is no longer registered: it has to register again")
        return grant_id

    def grant(self, grant_id: str) -> Grant | None:
        """One grant (revoked ones too), or None."""
        with self._db.read() as conn:
            row = conn.execute(
                f"SELECT {_GRANT_COLUMNS} FROM oauth_grants g LEFT JOIN oauth_clients c ON c.client_id = g.client_id "
                "WHERE g.id = ?",
                (grant_id,),
            ).fetchone()
        return _grant(row) if row is not None else None

    def grants(self) -> list[Grant]:
        """Every grant, revoked ones included, oldest first."""
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {_GRANT_COLUMNS} FROM oauth_grants g LEFT JOIN oauth_clients c ON c.client_id = g.client_id "
                "ORDER BY g.created_at, g.id"
            ).fetchall()
        return [_grant(row) for row in rows]

    def revoke_grant(self, grant_id: str) -> bool:
        """Revoke a grant and so every token of it; False when no active grant has that id."""
        with self._db.transaction() as conn:
            cur = conn.execute(
                "UPDATE oauth_grants SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (_now(), grant_id)
            )
            if cur.rowcount == 1:
                conn.execute("DELETE FROM oauth_tokens WHERE grant_id = ?", (grant_id,))
        return cur.rowcount == 1

    def ever_granted(self) -> bool:
        """True once the owner approved any client (from then on, as once a key exists, a token is required)."""
        with self._db.read() as conn:
            return conn.execute("SELECT 1 FROM oauth_grants LIMIT 1").fetchone() is not None

    # -- secrets -----------------------------------------------------------------------------

    def issue(
        self, kind: Kind, client_id: str, grant_id: str | None, seconds: int, data: dict[str, Any] | None = None
    ) -> tuple[str, int]:
        """Make a new secret of ``kind``; return it (shown once: only its SHA-256 is kept) and its expiry."""
        prefix = {"access": ACCESS_PREFIX, "refresh": REFRESH_PREFIX, "code": CODE_PREFIX}.get(kind, "")
        secret = prefix + secrets.token_urlsafe(32)
        expires_at = int(time.time()) + seconds
        with self._db.transaction() as conn:
            conn.execute(
                "INSERT INTO oauth_tokens (sha256, kind, grant_id, client_id, expires_at, data, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (digest(secret), kind, grant_id, client_id, expires_at, json.dumps(data or {}), _now()),
            )
        return secret, expires_at

    def redeem(
        self, secret: str, kind: Kind, client_id: str, grant_id: str, data: dict[str, Any]
    ) -> tuple[str, str] | None:
        """Use a single-use ``code`` or ``refresh`` token and issue its grant's new access and refresh
        tokens, in one transaction: of two requests racing with one secret (two processes), exactly
        one gets tokens. Return them, or None when the secret was already used or the grant is revoked."""
        access, refresh = ACCESS_PREFIX + secrets.token_urlsafe(32), REFRESH_PREFIX + secrets.token_urlsafe(32)
        now, when = int(time.time()), _now()
        insert = (
            "INSERT INTO oauth_tokens (sha256, kind, grant_id, client_id, expires_at, data, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)"
        )
        with self._db.transaction() as conn:
            used = conn.execute(
                "UPDATE oauth_tokens SET used_at = ? WHERE sha256 = ? AND kind = ? AND grant_id = ? "
                "AND used_at IS NULL",
                (when, digest(secret), kind, grant_id),
            )
            if used.rowcount != 1:
                return None
            live = conn.execute(
                "SELECT 1 FROM oauth_grants WHERE id = ? AND revoked_at IS NULL", (grant_id,)
            ).fetchone()
            if live is None:
                return None
            for token, made, seconds in ((access, "access", ACCESS_SECONDS), (refresh, "refresh", REFRESH_SECONDS)):
                conn.execute(insert, (digest(token), made, grant_id, client_id, now + seconds, json.dumps(data), when))
        return access, refresh

    def find(self, secret: str, kind: Kind) -> Secret | None:
        """A secret of ``kind`` as stored (expired or used ones too), or None when there is none."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT kind, grant_id, client_id, expires_at, used_at, data FROM oauth_tokens "
                "WHERE sha256 = ? AND kind = ?",
                (digest(secret), kind),
            ).fetchone()
        if row is None:
            return None
        return Secret(row[0], row[1], row[2], int(row[3]), row[4], json.loads(row[5]))

    def use(self, secret: str, kind: Kind) -> bool:
        """Mark a single-use secret (a code, a refresh token, a request) used; False when it already was."""
        with self._db.transaction() as conn:
            cur = conn.execute(
                "UPDATE oauth_tokens SET used_at = ? WHERE sha256 = ? AND kind = ? AND used_at IS NULL",
                (_now(), digest(secret), kind),
            )
        return cur.rowcount == 1

    def update(self, secret: str, kind: Kind, data: dict[str, Any]) -> None:
        """Replace the data of a stored secret (a pending request's consent-form token)."""
        with self._db.transaction() as conn:
            conn.execute(
                "UPDATE oauth_tokens SET data = ? WHERE sha256 = ? AND kind = ?",
                (json.dumps(data), digest(secret), kind),
            )

    def purge(self) -> int:
        """Drop the secrets that expired over a day ago; return how many went."""
        with self._db.transaction() as conn:
            return int(
                conn.execute("DELETE FROM oauth_tokens WHERE expires_at < ?", (int(time.time()) - 86400,)).rowcount
            )

    # -- the door ----------------------------------------------------------------------------

    def caller(self, token: str) -> Caller:
        """Given an access token (``afi_oat_…``), return its grant's caller.

        Raises:
            Unauthorized: unknown, expired, or of a revoked grant.
        """
        found = self.find(token, "access")
        if found is None or found.grant_id is None:
            raise Unauthorized("the access token is unknown or was revoked")
        if found.expires_at < time.time():
            raise Unauthorized("the access token has expired: refresh it")
        grant = self.grant(found.grant_id)
        if grant is None or grant.revoked_at is not None:
            raise Unauthorized("the access token's grant was revoked")
        caller = grant.caller()
        narrowed = found.data.get("scopes")  # a refresh may ask for fewer scopes than the grant holds
        if not narrowed:
            return caller
        return Caller(caller.principal, caller.space, caller.scopes & frozenset(narrowed), caller.resource)
