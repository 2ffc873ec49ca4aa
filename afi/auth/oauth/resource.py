"""The resource (RFC 8707) a token is bound to: which server, and the space its path names.

A resource is this server's base URL, its ``/mcp`` endpoint, or either under ``/spaces/<space>``:
``http://127.0.0.1:8765/mcp`` names the server's own space (``--space``, else ``default``),
``http://127.0.0.1:8765/spaces/work/mcp`` the space ``work``. What a resource covers is its mount
point: the root (``/mcp``, ``/afi/*``, ``/ledger/*``, ``/admin/*``, the web page) or ``/spaces/<space>``
(the same routes under it); a resource and its ``/mcp`` name the same mount point. A token carries its
resource, and a door refuses it on another server (the resource's host and port are not the ones the
request was sent to) and at another mount point (:func:`mount_of`), even one serving the same space.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ...provider import SCOPES

__all__ = [
    "SPACE_NAME",
    "Resource",
    "advertised_scopes",
    "authority",
    "mount_of",
    "name_servers",
    "named_servers",
    "same_authority",
]

SPACE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_PATH = re.compile(r"^(?:/spaces/(?P<space>[^/]+))?(?:/mcp)?/?$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def authority(netloc: str, scheme: str = "http") -> str:
    """Given a URL's host[:port] (or a ``Host`` header), return it lower-cased with its port spelled out."""
    try:
        parts = urlsplit(f"{scheme}://{netloc.strip()}")
        port = parts.port or _DEFAULT_PORTS.get(scheme, 0)
    except ValueError:
        return ""
    host = (parts.hostname or "").lower()
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def same_authority(resource: str, host: str) -> bool:
    """Given a token's resource URL and the ``Host`` a request was sent to, True when they name one server."""
    parts = urlsplit(resource)
    mine = authority(parts.netloc, parts.scheme or "http")
    return bool(mine) and (mine == authority(host, parts.scheme or "http"))


def mount_of(resource: str) -> str | None:
    """Given a token's resource URL, return the space its mount point names (``/spaces/<space>``), ``""``
    for the root mount point, or None for a URL no mount point of this server has."""
    try:
        found = _PATH.match(urlsplit(resource).path)
    except ValueError:
        return None
    if found is None:
        return None
    return found.group("space") or ""


@dataclass(frozen=True)
class Resource:
    """A resource this server serves: its canonical URL and the space it names."""

    url: str
    space: str

    @classmethod
    def parse(cls, asked: str | None, base: str, default_space: str, allowed: frozenset[str] | None) -> Resource:
        """Given the ``resource`` a client asked for (None: the server itself), the base URL the request
        reached and the server's own space, return the resource.

        Raises:
            ValueError: the resource is another server's, not a URL of this one, or names a space
                this server does not serve; the message says which.
        """
        base = base.rstrip("/")
        if asked is None or asked == "":
            return cls(base + "/mcp", default_space)
        try:
            parts = urlsplit(asked)
        except ValueError:
            raise ValueError(f"the resource {asked[:200]!r} is not a URL") from None
        if parts.fragment or parts.query or parts.scheme not in ("http", "https"):
            raise ValueError("the resource must be an http(s) URL without a query or fragment")
        if not same_authority(asked, urlsplit(base).netloc):
            raise ValueError(f"the resource {asked[:200]!r} is not on this server ({base})")
        found = _PATH.match(parts.path)
        if found is None:
            raise ValueError(f"the resource path {parts.path[:200]!r} is not one this server serves (…/mcp)")
        space = found.group("space") or default_space
        if not SPACE_NAME.match(space):
            raise ValueError(f"the resource names a malformed space {space[:80]!r}")
        if allowed is not None and space not in allowed:
            raise ValueError(f"this server does not serve the space {space!r}")
        return cls(f"{parts.scheme}://{parts.netloc.lower()}{parts.path.rstrip('/')}", space)


def name_servers(app: Any, *, issuer: str | None, builtin: bool) -> None:
    """Record on ``app`` the authorization server its metadata names: ``issuer`` (``afi serve --issuer``), or
    this server itself when ``builtin`` (read by :func:`named_servers` and :func:`advertised_scopes`)."""
    app.state.afi_issuer = issuer
    app.state.afi_oauth = builtin


def named_servers(app: Any, base: str) -> dict[str, list[str]]:
    """What RFC 9728 metadata adds for ``app`` (an ASGI app whose ``state`` says): the configured issuer
    (``afi serve --issuer``), else this server itself when it serves the built-in authorization server."""
    issuer = getattr(app.state, "afi_issuer", None)
    if issuer is not None:
        return {"authorization_servers": [str(issuer)]}
    return {"authorization_servers": [base]} if getattr(app.state, "afi_oauth", False) else {}


def advertised_scopes(app: Any) -> list[str]:
    """The ``scopes_supported`` of RFC 9728 metadata for ``app``: the scopes an authorization request
    for this resource may ask for. The built-in authorization server grants read and write only (admin
    stays with API keys), and MCP clients register asking for every listed scope, so listing admin
    there would have them refused at registration; otherwise every scope a key or token can carry."""
    if getattr(app.state, "afi_issuer", None) is None and getattr(app.state, "afi_oauth", False):
        return list(SCOPES[:2])
    return list(SCOPES)
