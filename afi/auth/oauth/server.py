"""The built-in authorization server, as the MCP SDK's ``OAuthAuthorizationServerProvider``.

The SDK's handlers speak the protocol (RFC 8414 metadata, RFC 7591 registration, ``/authorize``
with PKCE S256, ``/token``, RFC 7009 revocation); this class keeps the state (:mod:`.store`) and
decides: the resource asked (RFC 8707) must be this server and names the grant's space; only
``afi:read`` and ``afi:write`` are granted; ``authorize`` grants nothing by itself but parks the
request and sends the browser to the owner's consent page; a code or a refresh token works once (a
second use of either revokes its grant: it was stolen or replayed); revoking any token revokes its
grant. Every grant, refusal and revocation is in the audit log. A client registers (its secret kept
as a SHA-256, checked by :mod:`.client_auth`) or is known by its metadata document's URL
(:mod:`.client_metadata`).
"""

from __future__ import annotations

import json
import re
import time
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from ...provider import Caller
from ...storage.database import Database
from ..audit import AuditLog
from .client_metadata import ClientMetadataDocuments, ClientMetadataError, ClientMetadataPolicy, is_document_client
from .paths import CONSENT_PATH
from .resource import Resource
from .store import ACCESS_SECONDS, CODE_SECONDS, REQUEST_SECONDS, Kind, OAuthStore, digest

__all__ = ["BASE_URL", "CONSENT_PATH", "GRANTABLE", "AfiAuthorizationServer"]

GRANTABLE = ("afi:read", "afi:write")
BASE_URL: ContextVar[str] = ContextVar("afi_oauth_base_url")  # the base URL the current request reached
_REFUSED_SCHEMES = frozenset({"javascript", "data", "file", "vbscript", "about", "blob", "filesystem"})
_S256_CHALLENGE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # BASE64URL(SHA-256(verifier)), RFC 7636 4.2
MAX_REDIRECT_URIS = 10
MAX_CLIENT_METADATA = 8 * 1024  # characters of a client's registration JSON, as kept


def _redirect_problem(uri: str) -> str | None:
    """Why a redirect URI is refused, or None: https, http on loopback, or a native app's own scheme."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme in _REFUSED_SCHEMES or not scheme:
        return f"the redirect URI {uri[:200]!r} has a refused scheme"
    if parts.fragment:
        return "a redirect URI must not have a fragment"
    if scheme == "http" and (parts.hostname or "") not in ("localhost", "127.0.0.1", "::1"):
        return "an http redirect URI must be on loopback (localhost, 127.0.0.1 or [::1]); use https"
    return None


class AfiAuthorizationServer:
    """The SDK provider protocol over :class:`~.store.OAuthStore`.

    Args:
        database: the store.
        default_space: the space a resource without ``/spaces/<space>`` names (``afi serve --space``).
        allowed_spaces: when given, only these spaces may be granted.
        client_metadata: whether and how client ID metadata documents are fetched (on by default).
    """

    def __init__(
        self, database: Database, *, default_space: str = "default", allowed_spaces: Any = None,
        client_metadata: ClientMetadataPolicy | None = None,
    ) -> None:  # fmt: skip
        self.store = OAuthStore(database)
        self.audit = AuditLog(database)
        self.default_space = default_space
        self.allowed_spaces: frozenset[str] | None = frozenset(allowed_spaces) if allowed_spaces else None
        self.documents = ClientMetadataDocuments(client_metadata or ClientMetadataPolicy(), GRANTABLE)
        self.store.hash_client_secrets()  # records of older versions held secrets in plain text

    def record(self, who: str, space: str, verb: str, client_id: str, result: str, grant_id: str = "") -> None:
        """One audit row for the authorization server (a grant, a refusal, a revocation)."""
        path = f"/oauth/{client_id}" + (f"/{grant_id}" if grant_id else "")
        self.audit.record(Caller(principal=who, space=space), verb, path, result)

    # -- clients -----------------------------------------------------------------------------

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if is_document_client(client_id):
            try:
                return await self.document_client(client_id)
            except ClientMetadataError:
                return None
        info = await anyio.to_thread.run_sync(self.store.client, client_id)
        return OAuthClientInformationFull.model_validate(info) if info is not None else None

    async def document_client(self, url: str) -> OAuthClientInformationFull:
        """The client a metadata document describes (fetched, or cached), its redirect URIs checked.

        Raises:
            ClientMetadataError: documents are off, or this one cannot be fetched or used.
        """
        client = await self.documents.client(url)
        uris = [str(uri) for uri in client.redirect_uris or ()]
        if len(uris) > MAX_REDIRECT_URIS:
            raise ClientMetadataError(f"the metadata document lists over {MAX_REDIRECT_URIS} redirect URIs")
        problem = next(filter(None, map(_redirect_problem, uris)), None)
        if problem is not None:
            raise ClientMetadataError(f"the metadata document's redirect_uris: {problem}")
        return client

    async def keep_document_client(self, client_id: str) -> None:
        """Record a client known by its metadata document as the owner approves it, so it is listed.

        Raises:
            ClientMetadataError: its document can no longer be fetched or used.
        """
        if is_document_client(client_id):
            client = await self.document_client(client_id)
            info = {**client.model_dump(mode="json", exclude_none=True), "client_id_metadata_document": True}
            await anyio.to_thread.run_sync(self.store.keep_client, client_id, info)

    async def client_secret_digest(self, client_id: str) -> str | None:
        """The SHA-256 of a registered client's secret (:mod:`.client_auth`), or None."""
        return await anyio.to_thread.run_sync(self.store.client_secret_digest, client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        if len(client_info.redirect_uris or ()) > MAX_REDIRECT_URIS:
            raise RegistrationError(
                "invalid_redirect_uri", f"a client may register at most {MAX_REDIRECT_URIS} redirect URIs"
            )
        for uri in client_info.redirect_uris or ():
            problem = _redirect_problem(str(uri))
            if problem is not None:
                raise RegistrationError("invalid_redirect_uri", problem)
        info = client_info.model_dump(mode="json", exclude_none=True)
        if "client_secret" in info:  # shown once in the registration's answer, kept only as its SHA-256
            info["client_secret_sha256"] = digest(str(info.pop("client_secret")))
        if len(json.dumps(info)) > MAX_CLIENT_METADATA:
            raise RegistrationError(
                "invalid_client_metadata", f"the client's metadata is over {MAX_CLIENT_METADATA // 1024} KiB"
            )
        if not await anyio.to_thread.run_sync(self.store.add_client, client_info.client_id, info):
            raise RegistrationError("invalid_client_metadata", "this server holds as many clients as it may")

    # -- authorization: park the request, the owner decides on the consent page ----------------

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        base = BASE_URL.get()
        if not _S256_CHALLENGE.match(params.code_challenge):
            raise AuthorizeError("invalid_request", "code_challenge must be 43 base64url characters (PKCE S256)")
        try:
            resource = Resource.parse(params.resource, base, self.default_space, self.allowed_spaces)
        except ValueError as err:
            raise AuthorizeError("invalid_target", str(err)) from None
        scopes = params.scopes or list(GRANTABLE)
        refused = [scope for scope in scopes if scope not in GRANTABLE]
        if refused:
            raise AuthorizeError("invalid_scope", f"{refused[0]} is not granted over OAuth (afi:read, afi:write)")
        data = {
            "state": params.state,
            "scopes": scopes,
            "code_challenge": params.code_challenge,
            "redirect_uri": str(params.redirect_uri),
            "explicit": params.redirect_uri_provided_explicitly,
            "resource": resource.url,
            "space": resource.space,
            "issuer": base.rstrip("/"),
        }
        request_id, _ = await anyio.to_thread.run_sync(
            lambda: self.store.issue("request", client.client_id, None, REQUEST_SECONDS, data)
        )
        return f"{base.rstrip('/')}{CONSENT_PATH}?request={request_id}"

    def approve(self, request_id: str, approver: str) -> tuple[str, dict[str, Any]]:
        """The owner approved a pending request: record the grant, issue a code; return it with the
        request's data (synchronous: from a worker thread).

        Raises:
            ValueError: the request is unknown, expired or already decided.
        """
        found = self.store.find(request_id, "request")
        if found is None or found.expires_at < time.time() or not self.store.use(request_id, "request"):
            raise ValueError("this authorization request is unknown, expired or already decided")
        data = found.data
        grant_id = self.store.add_grant(found.client_id, data["space"], data["scopes"], data["resource"], approver)
        code, _ = self.store.issue("code", found.client_id, grant_id, CODE_SECONDS, data)
        self.record(approver, data["space"], "oauth.grant", found.client_id, "ok", grant_id)
        return code, data

    # -- codes and tokens --------------------------------------------------------------------

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        found = await anyio.to_thread.run_sync(self.store.find, authorization_code, "code")
        if found is None or found.grant_id is None or found.client_id != client.client_id:
            return None
        if found.used_at is not None:  # a replayed code: whoever holds it is not to be trusted
            await self._revoke(found.grant_id, "oauth.code-replayed")
            return None
        data = found.data
        return AuthorizationCode(
            code=authorization_code,
            scopes=data["scopes"],
            expires_at=found.expires_at,
            client_id=found.client_id,
            code_challenge=data["code_challenge"],
            redirect_uri=data["redirect_uri"],
            redirect_uri_provided_explicitly=data["explicit"],
            resource=data["resource"],
            subject=found.grant_id,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        code, grant_id = authorization_code.code, authorization_code.subject or ""
        return await anyio.to_thread.run_sync(self._redeem, code, "code", client.client_id, grant_id,
                                              authorization_code.scopes)  # fmt: skip

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        found = await anyio.to_thread.run_sync(self.store.find, refresh_token, "refresh")
        if found is None or found.grant_id is None or found.client_id != client.client_id:
            return None
        if found.used_at is not None:  # a rotated refresh token came back: revoke the whole grant
            await self._revoke(found.grant_id, "oauth.refresh-replayed")
            return None
        grant = await anyio.to_thread.run_sync(self.store.grant, found.grant_id)
        if grant is None or grant.revoked_at is not None:
            return None
        scopes = found.data.get("scopes") or list(grant.scopes)
        return RefreshToken(
            token=refresh_token,
            client_id=found.client_id,
            scopes=scopes,
            expires_at=found.expires_at,
            resource=grant.resource,
            subject=grant.id,
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        token, grant_id = refresh_token.token, refresh_token.subject or ""
        return await anyio.to_thread.run_sync(self._redeem, token, "refresh", client.client_id, grant_id, scopes)

    def _redeem(self, secret: str, kind: Kind, client_id: str, grant_id: str, scopes: list[str]) -> OAuthToken:
        """Trade a code or a refresh token for new tokens, once. A second use, even one racing the first
        from another process, is refused and revokes the grant (RFC 9700 4.14, OAuth 2.1 4.1.3), so
        the tokens the first use got stop working too."""
        grant = self.store.grant(grant_id)
        if grant is None or grant.revoked_at is not None:
            raise TokenError("invalid_grant", "the grant was revoked")
        kept = [scope for scope in scopes if scope in grant.scopes]
        issued = self.store.redeem(secret, kind, client_id, grant_id, {"scopes": kept})
        if issued is None:
            if self.store.revoke_grant(grant_id):
                self.record(grant.id, grant.space, f"oauth.{kind}-replayed", grant.client_id, "ok", grant.id)
            name = "authorization code" if kind == "code" else "refresh token"
            raise TokenError("invalid_grant", f"the {name} was already used: its grant is revoked")
        self.store.purge()
        access, refresh = issued
        return OAuthToken(access_token=access, expires_in=ACCESS_SECONDS, scope=" ".join(kept), refresh_token=refresh)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = await anyio.to_thread.run_sync(self.store.find, token, "access")
        if found is None or found.grant_id is None or found.expires_at < time.time():
            return None
        grant = await anyio.to_thread.run_sync(self.store.grant, found.grant_id)
        if grant is None or grant.revoked_at is not None:
            return None
        return AccessToken(
            token=token,
            client_id=found.client_id,
            scopes=found.data.get("scopes") or list(grant.scopes),
            expires_at=found.expires_at,
            resource=grant.resource,
            subject=grant.id,
        )

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        if token.subject:
            await self._revoke(token.subject, "oauth.revoke")

    async def _revoke(self, grant_id: str, verb: str) -> None:
        def revoke() -> None:
            grant = self.store.grant(grant_id)
            if grant is not None and self.store.revoke_grant(grant_id):
                self.record(grant.id, grant.space, verb, grant.client_id, "ok", grant.id)

        await anyio.to_thread.run_sync(revoke)

    async def exchange_identity_assertion(self, client: OAuthClientInformationFull, params: Any) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "the JWT bearer grant is not supported by this server")
