"""The door every network binding shares: who asks, and whether they may come in at all.

``Door.admit`` turns a request's credentials into a :class:`~afi.provider.Caller`: it refuses tokens in
query strings, reads ``Authorization: Bearer``, authenticates through the provider, rate-limits (by
address on failure, by principal on success), binds the caller to the space a URL names, and guards
the keyless loopback mode: until the first API key is created, the local owner is served only to
requests from this machine whose ``Host`` and ``Origin`` are loopback, so a web page (or a
DNS-rebound name) cannot reach the memory. Once keys exist, the owner's token (``afi auth token``) is still the owner.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from ..errors import Forbidden, InvalidPath, Unauthorized
from ..provider import Caller, Provider
from .keys import LOCAL_OWNER
from .oauth.resource import same_authority
from .ratelimit import RateLimiter

__all__ = ["QUERY_TOKEN_NAMES", "Door", "InvalidToken", "is_loopback_host", "is_loopback_origin"]

QUERY_TOKEN_NAMES = ("access_token", "token", "api_key", "apikey", "bearer")


class InvalidToken(Unauthorized):
    """A genuine key presented where it does not belong (another space): RFC 6750 ``invalid_token``."""


def is_loopback_host(host: str) -> bool:
    """Given a host name or address (a ``Host`` header's, port and brackets allowed), True for this machine."""
    name = host.strip()
    if name.startswith("["):
        name = name[1 : name.find("]")] if "]" in name else name[1:]
    elif name.count(":") == 1:
        name = name.split(":", 1)[0]
    if name.lower() == "localhost":
        return True
    try:
        return _loopback_ip(name)
    except ValueError:
        return False


def is_loopback_origin(origin: str) -> bool:
    """Given an Origin header, True when the page it names is served from this machine.

    ``null`` is foreign: browsers send it from sandboxed iframes, ``data:`` and ``file:`` pages and
    after cross-origin redirects, so any web page can make it.
    """
    origin = origin.strip()
    if origin.lower() == "null":
        return False
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:  # "http://[::1": an unclosed IPv6 bracket is no origin at all
        return False
    return is_loopback_host(netloc or origin)


def _from_this_machine(address: str) -> bool:
    """Given a peer address, False only for an IP address of another machine (a socket may have none)."""
    try:
        return _loopback_ip(address)
    except ValueError:
        return True


def _loopback_ip(text: str) -> bool:
    """True for a loopback address, an IPv4-mapped one (``::ffff:127.0.0.1``, a server on ``::``) too."""
    address = ipaddress.ip_address(text)
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


@dataclass(frozen=True)
class Door:
    """What a binding checks before any verb: credentials, rate, space, and the keyless guard."""

    provider: Provider
    rate_limit: RateLimiter | None = None
    allowed_spaces: frozenset[str] | None = None
    default_space: str | None = None

    def admit(
        self,
        *,
        authorization: str | None,
        query_keys: Iterable[str] = (),
        address: str = "unknown",
        url_space: str | None = None,
        host: str | None = None,
        origin: str | None = None,
    ) -> Caller:
        """Given a request's credentials and where it came from, return who asks.

        Raises:
            InvalidPath: a token in the query string.
            Unauthorized: a missing, malformed, unknown or revoked key (InvalidToken: another space's, or an
                OAuth token bound to another server's resource).
            Forbidden: a keyless request from another machine, or whose Host or Origin is not loopback.
            RateLimited: too many requests from this address or principal.
        """
        for name in query_keys:
            if name in QUERY_TOKEN_NAMES:
                raise InvalidPath(f"a token in the query string ({name}=…) is refused: send 'Authorization: Bearer'")
        token: str | None = None
        if authorization is not None:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "bearer" or not value.strip():
                raise Unauthorized("only 'Authorization: Bearer <token>' is accepted")
            token = value.strip()
        try:
            caller = self.provider.authenticate(token)
        except Unauthorized:
            if self.rate_limit is not None:
                self.rate_limit.check(f"addr:{address}")
            raise
        if self.rate_limit is not None:
            self.rate_limit.check(f"principal:{caller.principal}")
        if caller.resource is not None and host is not None and not same_authority(caller.resource, host):
            raise InvalidToken(f"this token was issued for another server ({caller.resource}), not {host}")
        if token is None:
            if not _from_this_machine(address):
                raise Forbidden("without API keys this server answers only to this machine (create a key)")
            if host is not None and not is_loopback_host(host):
                raise Forbidden("without API keys this server answers only to loopback names (create a key)")
            if origin is not None and not is_loopback_origin(origin):
                raise Forbidden(f"without API keys the Origin {origin!r} may not use this server")
        if caller.principal == LOCAL_OWNER.principal and (url_space or self.default_space):
            # The owner (keyless on loopback, or with the owner token) works in whichever space the URL names.
            caller = replace(caller, space=url_space or self.default_space or caller.space)
        if url_space is not None and caller.space != url_space:
            raise InvalidToken(f"this key is bound to another space, not {url_space!r}")
        if self.allowed_spaces is not None and caller.space not in self.allowed_spaces:
            raise InvalidToken(f"this server does not serve the space {caller.space!r}")
        return caller
