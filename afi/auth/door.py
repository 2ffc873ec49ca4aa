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
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from ..errors import Forbidden, InvalidPath, Unauthorized
from ..provider import Caller, Provider
from .keys import LOCAL_OWNER
from .oauth.resource import mount_of, same_authority
from .ratelimit import RateLimiter

__all__ = ["QUERY_TOKEN_NAMES", "Door", "InvalidToken", "is_loopback_host", "is_loopback_origin", "one_header"]

QUERY_TOKEN_NAMES = ("access_token", "token", "api_key", "apikey", "bearer")


class InvalidToken(Unauthorized):
    """A genuine key presented where it does not belong (another space): RFC 6750 ``invalid_token``."""


# RFC 9110 7.2 and RFC 6454 6.1: a Host is ``host[:port]``, an Origin ``scheme://host[:port]`` and nothing
# else (no userinfo, path, query or fragment); an IPv6 address is bracketed in both.
_AUTHORITY = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9._-]+))(?::(?P<port>[0-9]{1,5}))?")
_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<authority>.+)", re.IGNORECASE)


def is_loopback_host(host: str) -> bool:
    """Given a host name or address (a ``Host`` header's: a port and brackets allowed; a bare IPv6
    address too), True for this machine. Anything but one host and one port is False."""
    name = host.strip()
    try:
        return _loopback_ip(name)  # a bare address: "::1", "127.0.0.1", "::ffff:127.0.0.1"
    except ValueError:
        return _loopback_authority(name)


def is_loopback_origin(origin: str) -> bool:
    """Given an Origin header, True when the page it names is served from this machine: exactly
    ``http`` or ``https``, ``://``, a loopback host and an optional port, nothing more.

    ``null`` is foreign: browsers send it from sandboxed iframes, ``data:`` and ``file:`` pages and
    after cross-origin redirects, so any web page can make it.
    """
    found = _ORIGIN.fullmatch(origin.strip())
    return found is not None and _loopback_authority(found.group("authority"))


def _loopback_authority(text: str) -> bool:
    """Given ``host[:port]`` (an IPv6 address bracketed), True when it is exactly that and the host is loopback."""
    found = _AUTHORITY.fullmatch(text)
    if found is None or (found.group("port") is not None and int(found.group("port")) > 65535):
        return False
    name = found.group("v6") or found.group("name")
    if found.group("name") is not None and name.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if (address.version == 6) != (found.group("v6") is not None):
        return False  # "[127.0.0.1]" is no IPv6 literal; "::1" has no brackets here (the port would be ambiguous)
    return _loopback_ip(name)


def one_header(name: str, values: str | list[str] | None) -> str | None:
    """Given the values a request carries for a header that may appear once (Host, Origin), return it.

    Raises:
        InvalidPath: the header appears more than once (RFC 9110: a second Host is a bad request;
            a proxy or a loose parser may read either one).
    """
    if values is None or isinstance(values, str):
        return values
    if len(values) > 1:
        raise InvalidPath(f"the request carries {len(values)} {name} headers; one is allowed")
    return values[0] if values else None


def _check_resource(resource: str, host: str | None, url_space: str | None) -> None:
    """Given an OAuth token's resource (RFC 8707), the ``Host`` a request was sent to and the space its URL
    names (None: the root mount point), refuse the token unless the request is within that resource.

    Raises:
        InvalidToken: another server's resource, or another mount point's (``/spaces/other/mcp`` at ``/mcp``).
    """
    if host is not None and not same_authority(resource, host):
        raise InvalidToken(f"this token was issued for another server ({resource}), not {host}")
    issued = mount_of(resource)
    if issued != (url_space or ""):
        at = f"/spaces/{issued}" if issued else ""
        raise InvalidToken(
            f"this token was issued for {resource}: it is good at {at}/mcp and {at}/afi/… only, not at "
            + (f"/spaces/{url_space}/" if url_space else "the root")
        )


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
        host: str | list[str] | None = None,
        origin: str | list[str] | None = None,
    ) -> Caller:
        """Given a request's credentials and where it came from, return who asks.

        ``host`` and ``origin`` are the request's headers of those names: a string, or every value sent.

        Raises:
            InvalidPath: a token in the query string; more than one Host or Origin header.
            Unauthorized: a missing, malformed, unknown or revoked key (InvalidToken: another space's, or an
                OAuth token bound to another server's resource).
            Forbidden: a keyless request from another machine, or whose Host or Origin is not loopback.
            RateLimited: too many requests from this address or principal.
        """
        host, origin = one_header("Host", host), one_header("Origin", origin)
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
        if caller.resource is not None:
            _check_resource(caller.resource, host, url_space)
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
