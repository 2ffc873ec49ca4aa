"""Bearer tokens that are not API keys, for :meth:`afi.auth.keys.KeyStore.authenticate`: the built-in
authorization server's access tokens (``afi_oat_…``, looked up in the store) and, when ``afi serve``
names an issuer, that issuer's JWTs. Every door (HTTP, MCP, a mount's ``--token``) authenticates
through the key store, so these principals reach each door with the same space and scopes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...provider import Caller
from ...storage.database import Database
from .issuer import IssuerVerifier, looks_like_jwt
from .store import ACCESS_PREFIX, OAuthStore

__all__ = ["Bearers"]


@dataclass
class Bearers:
    """The OAuth access tokens of the store, and an external issuer's JWTs when one is configured."""

    database: Database
    issuer: IssuerVerifier | None = None

    def caller(self, token: str) -> Caller | None:
        """Given a bearer token, return its caller, or None when it is none of these kinds.

        Raises:
            Unauthorized: one of these tokens, refused (expired, revoked, tampered, …; the message says why).
        """
        if token.startswith(ACCESS_PREFIX):
            return OAuthStore(self.database).caller(token)
        if self.issuer is not None and looks_like_jwt(token):
            return self.issuer.caller(token)
        return None

    def required(self) -> bool:
        """True when a token is required whatever API keys exist: an issuer is configured, or the owner
        approved an OAuth client (a grant, like a key, ends keyless mode for good)."""
        return self.issuer is not None or OAuthStore(self.database).ever_granted()
