"""JWT access tokens from an existing identity provider (``afi serve --issuer URL --audience A``).

The issuer's signing keys come from its JWKS, found through its metadata (RFC 8414
``/.well-known/oauth-authorization-server``, else OpenID ``/.well-known/openid-configuration``),
whose ``issuer`` must be the configured one. PyJWT's ``PyJWKClient`` caches the keys and fetches the
set again when a token names a key id it does not hold (the issuer rotated its keys). Only RS256 and
ES256 are accepted, each only with a key of its own type: ``alg: none`` and HMAC tokens (which would
use a public key as a shared secret) are refused before any key is looked up. ``exp``, ``iss`` and
``aud`` are required and checked; the space comes from a configurable claim (else the server's
space), the scopes from another (a space-separated string or a list; unknown scopes are ignored).

PyJWT and httpx load with the first issuer token verified: whatever names no issuer (a mount, the
CLI, a server without ``--issuer``) starts without them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ...errors import RateLimited, Unauthorized
from ...provider import SCOPES, Caller
from .resource import SPACE_NAME

if TYPE_CHECKING:  # PyJWT and httpx load with the first token to verify: every key store imports this module
    import jwt

__all__ = ["ALGORITHMS", "IssuerConfig", "IssuerVerifier", "looks_like_jwt"]

ALGORITHMS = {"RS256": "RSA", "ES256": "EC"}  # accepted algorithm -> the key type it must be verified with
LEEWAY_SECONDS = 30
COOLDOWN = 2.0  # an unknown key id fetches the JWKS again at most this often (a flood of bogus ids costs little)
RETRY_SECONDS = 10.0  # after the issuer could not be read, tokens are answered "try again" this long, at once


def unreadable(why: str) -> RateLimited:
    """The answer while the issuer's metadata or keys cannot be read: 429 with a Retry-After (the
    token may be good, so the client keeps it and comes back), never a 500 or a hang."""
    return RateLimited(f"the identity provider cannot be read now ({why}); try again shortly",
                       retry_after=RETRY_SECONDS)  # fmt: skip


def looks_like_jwt(token: str) -> bool:
    """True for a compact JWS (three dot-separated parts, a JSON header): not an API key, not ours."""
    return token.count(".") == 2 and token.startswith("eyJ")


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: RFC 8414 (well-known before the path), then OpenID (after it)."""
    parts = urlsplit(issuer)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


@dataclass(frozen=True)
class IssuerConfig:
    """What ``afi serve`` was told of the issuer: its URL, the audience tokens must name, and claims."""

    issuer: str
    audience: str
    space_claim: str | None = None
    scope_claim: str = "scope"
    default_space: str = "default"


@dataclass
class IssuerVerifier:
    """Verifies the issuer's JWT access tokens and turns them into callers (thread-safe)."""

    config: IssuerConfig
    timeout: float = 5.0
    _jwks: jwt.PyJWKClient | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _failed: tuple[float, str] = field(default=(0.0, ""), init=False)  # until when, and why

    def _client(self) -> jwt.PyJWKClient:
        """The JWKS client, once the metadata named the set; a failure is remembered for
        :data:`RETRY_SECONDS`, so the requests queued behind a slow issuer do not each wait for it."""
        import jwt

        with self._lock:
            if self._jwks is None:
                until, why = self._failed
                if time.monotonic() < until:
                    raise unreadable(why)
                try:
                    uri = self._jwks_uri()
                except RateLimited as err:
                    self._failed = (time.monotonic() + RETRY_SECONDS, err.message)
                    raise
                self._jwks = jwt.PyJWKClient(
                    uri, cache_keys=True, lifespan=600, timeout=self.timeout, cooldown_duration=COOLDOWN
                )
            return self._jwks

    def _jwks_uri(self) -> str:
        """Read the issuer's metadata for its ``jwks_uri``.

        Raises:
            RateLimited: no metadata answers, or it names another issuer or no JWKS (:func:`unreadable`).
        """
        import httpx

        for url in metadata_urls(self.config.issuer):
            try:
                answer = httpx.get(url, timeout=self.timeout, follow_redirects=False)
                if answer.status_code != 200:
                    continue
                meta = answer.json()
            except (httpx.HTTPError, ValueError):
                continue
            if not isinstance(meta, dict):
                continue
            if str(meta.get("issuer", "")).rstrip("/") != self.config.issuer.rstrip("/"):
                raise unreadable(f"the metadata at {url} names another issuer, {str(meta.get('issuer'))[:200]!r}")
            uri = meta.get("jwks_uri")
            if not isinstance(uri, str) or not uri.startswith(("https://", "http://")):
                raise unreadable(f"the metadata at {url} names no jwks_uri")
            return uri
        raise unreadable(f"{self.config.issuer} publishes no metadata (RFC 8414 or OpenID) this server can read")

    def caller(self, token: str) -> Caller:
        """Given a JWT access token, return its caller.

        Raises:
            Unauthorized: a refused algorithm, a bad signature or form, an unknown key, expired, or
                for another audience or from another issuer; the message says which.
            RateLimited: the issuer's metadata or keys cannot be read now (slow, down, or garbage).
        """
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthorized("the access token is not a well-formed JWT") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise Unauthorized(f"the token's algorithm {alg!r} is not accepted (RS256 or ES256 only)")
        try:
            key = self._client().get_signing_key_from_jwt(token)
        except jwt.PyJWKClientConnectionError:
            raise unreadable("its key set does not answer") from None
        except jwt.PyJWTError:
            raise Unauthorized("the token is signed with a key the issuer does not publish") from None
        except (OSError, ValueError, UnicodeError):  # a reset mid-answer; a key set that is not JSON
            raise unreadable("its key set is not a readable JSON Web Key Set") from None
        if key.key_type != ALGORITHMS[alg]:
            raise Unauthorized(f"the token's algorithm {alg} does not fit its key ({key.key_type})")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=self.config.audience,
                issuer=self.config.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise Unauthorized("the access token has expired") from None
        except jwt.InvalidAudienceError:
            raise Unauthorized(f"the access token is for another audience, not {self.config.audience!r}") from None
        except jwt.InvalidIssuerError:
            raise Unauthorized(f"the access token is from another issuer, not {self.config.issuer!r}") from None
        except jwt.PyJWTError as err:
            raise Unauthorized(f"the access token is refused: {err}") from None
        return self._caller_of(claims)

    def _caller_of(self, claims: dict[str, Any]) -> Caller:
        space = self.config.default_space
        if self.config.space_claim is not None:
            named = claims.get(self.config.space_claim)
            if not isinstance(named, str) or not SPACE_NAME.match(named):
                raise Unauthorized(f"the access token's {self.config.space_claim!r} claim names no valid space")
            space = named
        raw = claims.get(self.config.scope_claim, "")
        listed = raw if isinstance(raw, list) else []
        asked = raw.split() if isinstance(raw, str) else [s for s in listed if isinstance(s, str)]
        scopes = frozenset(s for s in asked if s in SCOPES)
        subject = str(claims.get("sub") or claims.get("client_id") or claims.get("azp") or "unknown")
        return Caller(principal=f"jwt:{subject}"[:200], space=space, scopes=scopes)
