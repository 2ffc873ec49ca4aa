"""Client ID metadata documents (MCP authorization, revision 2025-11-25): a client whose ``client_id``
is an https URL publishes its metadata there, and the authorization server fetches it.

That fetch goes out from the server to an address a stranger chose, so it is fenced:

- the URL is https, with a host, no userinfo, no fragment, no dot segments, and a path that is not ``/``;
- the host is resolved once and every address it has must be public: loopback, private, link-local,
  multicast, reserved, unspecified and shared addresses are refused (an IPv6 address holding an IPv4
  one, mapped, 6to4 or Teredo, is judged by it; 6to4 and Teredo are refused anyway), unless the
  operator allowed that host (``--client-metadata-allow-host``);
- the connection goes to the address that was checked (the URL's name is only the TLS server name
  and the ``Host`` header), so a second DNS answer cannot point it elsewhere; no proxy from the
  environment, no redirect followed;
- a few seconds for the whole exchange, a 200 with a JSON content type, at most
  :data:`MAX_DOCUMENT_BYTES` read as a stream;
- a bounded cache: a document for its ``Cache-Control: max-age`` within [:data:`MIN_CACHE_SECONDS`,
  :data:`MAX_CACHE_SECONDS`], a failure for :data:`FAILURE_CACHE_SECONDS`.

Every failure is a :class:`ClientMetadataError` saying what was wrong, for an ``invalid_client`` answer.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import time
from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import ValidationError

from .client_policy import FETCH_SECONDS, MAX_DOCUMENT_BYTES, ClientMetadataPolicy

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "ClientMetadataDocuments",
    "ClientMetadataError",
    "ClientMetadataPolicy",
    "address_problem",
    "is_document_client",
]

CACHE_ENTRIES = 256
MIN_CACHE_SECONDS, DEFAULT_CACHE_SECONDS, MAX_CACHE_SECONDS = 30, 300, 24 * 3600
MAX_FETCHES = 8  # documents fetched at once, whatever asks: strangers cannot hold more connections open
FAILURE_CACHE_SECONDS = 10
MAX_URL_CHARS = 2048
_KEPT = ("client_name", "client_uri", "logo_uri", "contacts", "tos_uri", "policy_uri", "software_id",
         "software_version", "redirect_uris", "grant_types", "response_types")  # fmt: skip
_GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d{1,10})\"?\s*(?:,|$)", re.IGNORECASE)
_JSON_TYPE = re.compile(r"^application/([a-z0-9.+-]+\+)?json$")


class ClientMetadataError(Exception):
    """A client ID metadata document that cannot be used; ``str()`` says why, for the client and the owner."""


def is_document_client(client_id: str) -> bool:
    """True for a client id that is a URL (a metadata document's, or an http one to be refused)."""
    return client_id[:8].lower().startswith(("https://", "http://"))


def address_problem(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why an address may not be fetched from (``"loopback"``, ``"private"``, …), or None when it is public."""
    if isinstance(address, ipaddress.IPv6Address):  # an IPv4 address inside (mapped, 6to4, Teredo) is judged too
        inner = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
        if inner is not None:
            return address_problem(inner) or ("non-public" if address.teredo or address.sixtofour else None)
    kinds = (("unspecified", address.is_unspecified), ("loopback", address.is_loopback),
             ("link-local", address.is_link_local), ("multicast", address.is_multicast),
             ("private", address.is_private), ("reserved", address.is_reserved),
             ("non-public", not address.is_global))  # fmt: skip
    return next((kind for kind, flag in kinds if flag), None)


def _check_url(url: str) -> tuple[str, int, str]:
    """Given a URL client id, return its host, port and request target.

    Raises:
        ClientMetadataError: the URL may not name a metadata document.
    """
    if len(url) > MAX_URL_CHARS:
        raise ClientMetadataError(f"a client id URL may be at most {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
        port = parts.port or 443
    except ValueError:
        raise ClientMetadataError(f"the client id {url[:200]!r} is not a valid URL") from None
    if parts.scheme != "https":
        raise ClientMetadataError(f"a client id URL must be https, not {parts.scheme or 'schemeless'}")
    if parts.username is not None or parts.password is not None:
        raise ClientMetadataError("a client id URL must not hold a user name or password")
    if parts.fragment or url.endswith("#"):
        raise ClientMetadataError("a client id URL must not have a fragment")
    if not parts.hostname:
        raise ClientMetadataError("a client id URL must name a host")
    if parts.path in ("", "/"):
        raise ClientMetadataError("a client id URL must have a path (the metadata document's), not just '/'")
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        raise ClientMetadataError("a client id URL must not hold '.' or '..' path segments")
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    return parts.hostname.lower(), port, target


async def _resolve(host: str, port: int, allowed: bool) -> list[str]:
    """The addresses to connect to: every address of ``host`` must be public unless the host is allowed.

    Raises:
        ClientMetadataError: the host does not resolve, or to an address that may not be fetched from.
    """
    try:
        addresses = [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        try:
            with anyio.fail_after(FETCH_SECONDS):
                infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError, TimeoutError):
            raise ClientMetadataError(f"the host {host!r} of the client id URL could not be resolved") from None
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not addresses:
        raise ClientMetadataError(f"the host {host!r} of the client id URL has no address")
    for address in addresses if not allowed else ():
        problem = address_problem(address)
        if problem is not None:
            raise ClientMetadataError(
                f"the client id URL's host {host!r} is at {address}, a {problem} address: this server does "
                "not fetch from there (its operator may allow the host: afi serve --client-metadata-allow-host)"
            )
    return [str(address) for address in addresses[:3]]


def _cache_seconds(cache_control: str) -> int:
    match = _MAX_AGE.search(cache_control)
    if match is None:
        return MIN_CACHE_SECONDS if "no-store" in cache_control.lower() else DEFAULT_CACHE_SECONDS
    return max(MIN_CACHE_SECONDS, min(MAX_CACHE_SECONDS, int(match.group(1))))


def client_from_document(url: str, body: bytes, grantable: tuple[str, ...]) -> OAuthClientInformationFull:
    """Given a document's URL and bytes, return the public client it describes.

    Raises:
        ClientMetadataError: not a JSON object, a ``client_id`` other than the URL, a secret-based
            auth method, no redirect URI, a grant type or scope this server does not serve.
    """
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ClientMetadataError("the client's metadata document is not valid JSON") from None
    if not isinstance(document, dict):
        raise ClientMetadataError("the client's metadata document must be a JSON object")
    if document.get("client_id") != url:
        said = str(document.get("client_id"))[:200]
        raise ClientMetadataError(f"the metadata document's client_id ({said!r}) is not the URL it was fetched from")
    method = document.get("token_endpoint_auth_method", "none")
    if method != "none" or "client_secret" in document:
        raise ClientMetadataError(
            f"the metadata document asks for token_endpoint_auth_method {str(method)[:40]!r}: a client identified "
            "by its metadata document is a public client here ('none', with PKCE); no secret is accepted"
        )
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not uris or not all(isinstance(uri, str) for uri in uris):
        raise ClientMetadataError("the metadata document must list its redirect_uris (a non-empty list of URLs)")
    grants = document.get("grant_types", sorted(_GRANT_TYPES))
    if not isinstance(grants, list) or "authorization_code" not in grants or not set(grants) <= _GRANT_TYPES:
        raise ClientMetadataError(
            "the metadata document's grant_types must hold authorization_code, and may add refresh_token only"
        )
    asked = document.get("scope")
    scopes = [s for s in str(asked).split() if s in grantable] if asked is not None else list(grantable)
    if not scopes:
        raise ClientMetadataError(
            f"the metadata document asks for no scope this server grants ({', '.join(grantable)})"
        )
    info: dict[str, Any] = {key: document[key] for key in _KEPT if key in document}
    info.update(client_id=url, token_endpoint_auth_method="none", scope=" ".join(scopes), grant_types=grants)
    try:
        return OAuthClientInformationFull.model_validate(info)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ClientMetadataError(f"the metadata document's {where} is invalid: {first['msg']}") from None


class ClientMetadataDocuments:
    """Fetch, check and cache client ID metadata documents under a :class:`ClientMetadataPolicy`."""

    def __init__(self, policy: ClientMetadataPolicy, grantable: tuple[str, ...]) -> None:
        self.policy = policy
        self._grantable = grantable
        self._tls = policy.tls()
        self._cache: OrderedDict[str, tuple[float, OAuthClientInformationFull | str]] = OrderedDict()
        self._fetching: dict[str, anyio.Event] = {}  # one fetch per URL, whoever else asks waits for it

    async def client(self, url: str) -> OAuthClientInformationFull:
        """The client a URL client id describes, from the cache or fetched.

        Raises:
            ClientMetadataError: documents are turned off, or this one cannot be fetched or used.
        """
        if not self.policy.enabled:
            raise ClientMetadataError(
                "this server does not accept client ID metadata documents (afi serve --no-client-metadata): "
                "register the client instead (RFC 7591)"
            )
        for _ in range(3):  # a fetch by another caller, then its answer from the cache
            now = time.monotonic()
            cached = self._cache.get(url)
            if cached is not None and cached[0] > now:
                self._cache.move_to_end(url)
                if isinstance(cached[1], str):
                    raise ClientMetadataError(cached[1])
                return cached[1]
            running = self._fetching.get(url)
            if running is None:
                break
            await running.wait()
        else:
            raise ClientMetadataError("the client's metadata document is being fetched: try again in a moment")
        if len(self._fetching) >= MAX_FETCHES:
            raise ClientMetadataError(
                "this server is fetching too many client metadata documents at once: try again in a moment"
            )
        done = self._fetching[url] = anyio.Event()
        try:
            try:
                body, seconds = await self._fetch(url)
                found: OAuthClientInformationFull | str = client_from_document(url, body, self._grantable)
            except ClientMetadataError as err:
                found, seconds = str(err), FAILURE_CACHE_SECONDS
            self._remember(url, now + seconds, found)
        finally:
            del self._fetching[url]
            done.set()
        if isinstance(found, str):
            raise ClientMetadataError(found)
        return found

    def _remember(self, url: str, until: float, found: OAuthClientInformationFull | str) -> None:
        self._cache[url] = (until, found)
        self._cache.move_to_end(url)
        while len(self._cache) > CACHE_ENTRIES:
            self._cache.popitem(last=False)

    async def _fetch(self, url: str) -> tuple[bytes, int]:
        """The document's bytes and how long to keep them."""
        host, port, target = _check_url(url)
        shown = f"[{host}]" if ":" in host else host
        headers = {
            "Host": shown if port == 443 else f"{shown}:{port}",
            "Accept": "application/json",
            "Accept-Encoding": "identity",  # the byte cap counts what is sent: no compressed bomb
        }
        limit, seconds = self.policy.max_bytes, self.policy.timeout
        try:
            with anyio.fail_after(seconds):  # the name's lookup and the whole exchange, a body a byte at a time too
                addresses = await _resolve(host, port, host.strip("[]") in self.policy.allow_hosts)
                async with httpx.AsyncClient(
                    verify=self._tls, trust_env=False, follow_redirects=False, timeout=httpx.Timeout(seconds)
                ) as http:
                    response = await _connect(http, addresses, port, target, headers, host.strip("[]"))
                    try:
                        return await _read(response, limit)
                    finally:
                        await response.aclose()
        except (TimeoutError, httpx.TimeoutException):
            raise ClientMetadataError(f"the client's metadata document did not arrive within {seconds:g} s") from None
        except httpx.HTTPError as err:
            reason = str(err).strip() or type(err).__name__
            raise ClientMetadataError(f"the client's metadata document could not be fetched: {reason[:300]}") from None


async def _connect(
    http: httpx.AsyncClient, addresses: list[str], port: int, target: str, headers: dict[str, str], name: str
) -> httpx.Response:
    """Send the request to the checked addresses in turn (the next when one refuses the connection), with
    ``name`` as the TLS server name the certificate must match; return the first response, unread."""
    for index, address in enumerate(addresses):
        netloc = f"[{address}]" if ":" in address else address
        request = http.build_request(
            "GET", f"https://{netloc}:{port}{target}", headers=headers, extensions={"sni_hostname": name}
        )
        try:
            return await http.send(request, stream=True)
        except httpx.ConnectError:
            if index == len(addresses) - 1:
                raise
    raise httpx.ConnectError("no address to connect to")


async def _read(response: httpx.Response, limit: int) -> tuple[bytes, int]:
    """A checked response's body, at most ``limit`` bytes, and how long to keep it."""
    _check_response(response, limit)
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) > limit:
            raise ClientMetadataError(f"the client's metadata document is over {limit} bytes")
    return bytes(body), _cache_seconds(response.headers.get("cache-control", ""))


def _check_response(response: httpx.Response, limit: int) -> None:
    """Refuse a redirect, an error status, a type other than JSON and a declared length over ``limit``."""
    if response.is_redirect or 300 <= response.status_code < 400:
        raise ClientMetadataError(
            f"the client's metadata document URL answered {response.status_code} (a redirect), "
            "and redirects are not followed"
        )
    if response.status_code != 200:
        raise ClientMetadataError(f"the client's metadata document URL answered {response.status_code}, not 200")
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if not _JSON_TYPE.match(kind):
        raise ClientMetadataError(f"the client's metadata document is {kind or 'untyped'}, not application/json")
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise ClientMetadataError(f"the client's metadata document came {encoding[:40]}-encoded; identity was asked")
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise ClientMetadataError(f"the client's metadata document is over {limit} bytes")
