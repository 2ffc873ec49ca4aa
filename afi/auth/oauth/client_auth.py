"""Client authentication at the token and revocation endpoints, against hashed client secrets.

The MCP SDK's ``ClientAuthenticator`` compares the secret a client sends with the one in its client
record, in plain text. Here a registered client's record keeps only the secret's SHA-256
(``client_secret_sha256``), like an API key, and the secret sent is hashed and compared with
:func:`hmac.compare_digest`. A record written before secrets were hashed still holds
``client_secret``: it is compared the same way and rewritten with the hash on first use.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import time
from urllib.parse import unquote

from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.shared.auth import OAuthClientInformationFull
from starlette.requests import Request

from .server import AfiAuthorizationServer
from .store import digest

__all__ = ["HashedSecretAuthenticator"]


def _basic(header: str, client_id: str) -> str:
    """The secret of an ``Authorization: Basic`` header (RFC 6749 2.3.1), for ``client_id``."""
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != "basic":  # an auth scheme's name is case-insensitive (RFC 9110 11.1)
        raise AuthenticationError("this client authenticates with HTTP Basic (client_secret_basic)")
    try:
        sent_id, _, secret = base64.b64decode(credentials.strip(), validate=True).decode("utf-8").partition(":")
    except (ValueError, UnicodeDecodeError, binascii.Error):
        raise AuthenticationError("the Basic authorization header is malformed") from None
    if unquote(sent_id) != client_id:
        raise AuthenticationError("the Basic authorization header names another client")
    return unquote(secret)


class HashedSecretAuthenticator(ClientAuthenticator):
    """The SDK's authenticator with the secret compared as a SHA-256 digest, in constant time."""

    def __init__(self, provider: AfiAuthorizationServer) -> None:
        super().__init__(provider)
        self._clients = provider

    async def authenticate_request(self, request: Request) -> OAuthClientInformationFull:
        form = await request.form()
        client_id = form.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise AuthenticationError("client_id is missing")
        client = await self._clients.get_client(client_id)
        if client is None:
            raise AuthenticationError("the client is unknown (register it again)")
        method = client.token_endpoint_auth_method or "client_secret_post"
        if method == "none":
            return client
        if method == "client_secret_basic":
            sent = _basic(request.headers.get("Authorization", ""), client_id)
        elif method == "client_secret_post":
            posted = form.get("client_secret")
            sent = posted if isinstance(posted, str) else ""
        else:
            raise AuthenticationError(f"the client's auth method {method!r} is not supported")
        if not sent:
            raise AuthenticationError("the client secret is required")
        kept = await self._clients.client_secret_digest(client_id)
        if kept is None:
            raise AuthenticationError("the client is registered for a secret but has none stored")
        if not hmac.compare_digest(digest(sent).encode(), kept.encode()):
            raise AuthenticationError("the client secret is wrong")
        if client.client_secret_expires_at and client.client_secret_expires_at < int(time.time()):
            raise AuthenticationError("the client secret has expired: register again")
        return client.model_copy(update={"client_secret": sent})  # for the SDK's confidential-client checks
