"""The built-in OAuth 2.1 authorization server's routes, on the HTTP app of ``afi serve``.

- ``/.well-known/oauth-authorization-server``: RFC 8414 metadata, its issuer the base URL the request
  reached (the same base the protected-resource metadata names, so a client's checks agree);
- ``/oauth/register`` (RFC 7591), ``/oauth/authorize`` (code + PKCE S256), ``/oauth/token``,
  ``/oauth/revoke`` (RFC 7009): the MCP SDK's handlers over :class:`~afi.auth.oauth.server.AfiAuthorizationServer`;
- a client id that is an https URL names the client's metadata document (CIMD), fetched under
  :mod:`afi.auth.oauth.client_metadata`'s limits; one that cannot be used is ``invalid_client``
  (a page for a browser at ``/oauth/authorize``), never a 500;
- ``/oauth/consent``: the owner's page (:mod:`.consent`). Its form is protected by a one-time token
  held in a ``SameSite=Strict`` cookie, in the form and beside the pending request; an approval
  needs an admin key (or the owner's token), checked and rate-limited at the door like any key.

With ``afi serve --issuer``, none of these are served: the protected-resource metadata names that issuer.
"""

from __future__ import annotations

import hmac
import secrets
import time
from typing import Any
from urllib.parse import urlsplit

import anyio.to_thread
from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.revoke import RevocationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.provider import construct_redirect_uri
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.shared.auth import OAuthMetadata
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from afi.auth.door import Door
from afi.auth.oauth.client_auth import HashedSecretAuthenticator
from afi.auth.oauth.client_metadata import ClientMetadataError, is_document_client
from afi.auth.oauth.paths import (
    AS_METADATA_PATH,
    AUTHORIZE_PATH,
    CONSENT_PATH,
    REGISTER_PATH,
    REVOKE_PATH,
    TOKEN_PATH,
)
from afi.auth.oauth.resource import name_servers, named_servers
from afi.auth.oauth.server import BASE_URL, GRANTABLE, AfiAuthorizationServer
from afi.errors import AfiError, Forbidden
from afi.provider import Caller

from .consent import CSRF_COOKIE, consent_headers, render_consent, render_refusal

__all__ = ["AS_METADATA_PATH", "OAuthRoutes", "mount_oauth", "named_servers"]

MAX_REGISTRATION_BYTES = 16 * 1024
_STATUS = {"unauthorized": 401, "forbidden": 403, "rate_limited": 429}


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


class OAuthRoutes:
    """The routes over one authorization server."""

    def __init__(self, server: AfiAuthorizationServer) -> None:
        self.server = server
        options = ClientRegistrationOptions(enabled=True, valid_scopes=list(GRANTABLE), default_scopes=list(GRANTABLE))
        authenticator = HashedSecretAuthenticator(server)
        self._authorize = AuthorizationHandler(server)
        self._token = TokenHandler(server, authenticator)
        self._register = RegistrationHandler(server, options)
        self._revoke = RevocationHandler(server, authenticator)

    def routes(self) -> list[Route]:
        return [
            Route(AS_METADATA_PATH, self.metadata, methods=["GET"]),
            Route(AUTHORIZE_PATH, self.authorize, methods=["GET", "POST"]),
            Route(TOKEN_PATH, self.token, methods=["POST"]),
            Route(REGISTER_PATH, self.register, methods=["POST"]),
            Route(REVOKE_PATH, self.revoke, methods=["POST"]),
            Route(CONSENT_PATH, self.consent_page, methods=["GET"]),
            Route(CONSENT_PATH, self.consent_answer, methods=["POST"]),
        ]

    async def metadata(self, request: Request) -> Response:
        base = _base(request)
        metadata = OAuthMetadata.model_validate(
            {
                "issuer": base,
                "authorization_endpoint": base + AUTHORIZE_PATH,
                "token_endpoint": base + TOKEN_PATH,
                "registration_endpoint": base + REGISTER_PATH,
                "revocation_endpoint": base + REVOKE_PATH,
                "scopes_supported": list(GRANTABLE),
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic", "none"],
                "revocation_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic", "none"],
                "authorization_response_iss_parameter_supported": True,
                "client_id_metadata_document_supported": self.server.documents.policy.enabled,
            }
        )
        return await MetadataHandler(metadata).handle(request)

    async def register(self, request: Request) -> Response:
        """RFC 7591 registration, rate-limited by address (``afi serve --rate``) and with a small body:
        a client's metadata is kept for a day even if the owner never approves it."""
        door: Door = request.app.state.afi
        if door.rate_limit is not None:
            door.rate_limit.check(f"addr:{request.client.host if request.client else 'unknown'}")
        if len(await request.body()) > MAX_REGISTRATION_BYTES:  # read once: the handler reads it again from memory
            error = {"error": "invalid_client_metadata", "error_description": "the registration is over 16 KiB"}
            return JSONResponse(error, status_code=413)
        return await self._register.handle(request)

    async def authorize(self, request: Request) -> Response:
        params = request.query_params if request.method == "GET" else await request.form()
        problem = await self._document_problem(request, params.get("client_id"))
        if problem is not None:  # no redirect: the redirect URIs are the document's, which is not usable
            if "text/html" in request.headers.get("accept", ""):
                return HTMLResponse(render_refusal(problem), status_code=400, headers=consent_headers("about:blank"))
            return _invalid_client(problem, 400)
        reset = BASE_URL.set(_base(request))
        try:
            return await self._authorize.handle(request)
        finally:
            BASE_URL.reset(reset)

    async def token(self, request: Request) -> Response:
        problem = await self._document_problem(request, (await request.form()).get("client_id"))
        return _invalid_client(problem, 401) if problem is not None else await self._token.handle(request)

    async def revoke(self, request: Request) -> Response:
        problem = await self._document_problem(request, (await request.form()).get("client_id"))
        return _invalid_client(problem, 401) if problem is not None else await self._revoke.handle(request)

    async def _document_problem(self, request: Request, client_id: object) -> str | None:
        """Why a URL client id's metadata document cannot be used, or None (also for other client ids).
        Each such request may fetch: it is rate-limited by address (``afi serve --rate``) like registration."""
        if not isinstance(client_id, str) or not is_document_client(client_id):
            return None
        door: Door = request.app.state.afi
        if door.rate_limit is not None:
            door.rate_limit.check(f"addr:{request.client.host if request.client else 'unknown'}")
        try:
            await self.server.document_client(client_id)
        except ClientMetadataError as err:
            return str(err)
        return None

    # -- the consent page --------------------------------------------------------------------

    async def consent_page(self, request: Request) -> Response:
        request_id = request.query_params.get("request", "")
        found = await anyio.to_thread.run_sync(self._pending, request_id)
        if found is None:
            return _gone()
        client_id, data = found
        csrf = secrets.token_urlsafe(24)
        await anyio.to_thread.run_sync(lambda: self.server.store.update(request_id, "request", {**data, "csrf": csrf}))
        response = await self._page(request, request_id, client_id, data, csrf, None, 200)
        response.set_cookie(
            CSRF_COOKIE, csrf, max_age=900, path=CONSENT_PATH, httponly=True, samesite="strict",
            secure=request.url.scheme == "https",
        )  # fmt: skip
        return response

    async def consent_answer(self, request: Request) -> Response:
        form = await request.form()
        request_id, sent_csrf = str(form.get("request") or ""), str(form.get("csrf") or "")
        found = await anyio.to_thread.run_sync(self._pending, request_id)
        if found is None:
            return _gone()
        client_id, data = found
        cookie = request.cookies.get(CSRF_COOKIE, "")
        expected = str(data.get("csrf") or "")
        origin = request.headers.get("origin")
        if (
            not expected
            or not hmac.compare_digest(sent_csrf.encode(), expected.encode())
            or not hmac.compare_digest(cookie.encode(), expected.encode())
            or (origin is not None and origin.rstrip("/") != _base(request))
        ):
            await anyio.to_thread.run_sync(
                self.server.record, "anonymous", data["space"], "oauth.grant", client_id, "forbidden"
            )
            problem = "This form is stale or was sent from another site: reload the page and try again."
            return await self._page(request, request_id, client_id, data, expected, problem, 403)
        if form.get("decision") != "approve":
            return await self._deny(request_id, client_id, data)
        key = str(form.get("key") or "").strip()
        try:
            approver = await anyio.to_thread.run_sync(self._approver, request, key, data["space"])
        except AfiError as err:
            who = "anonymous" if not key else "unknown-key"
            await anyio.to_thread.run_sync(self.server.record, who, data["space"], "oauth.grant", client_id, err.code)
            return await self._page(
                request, request_id, client_id, data, expected, err.message, _STATUS.get(err.code, 403)
            )
        try:
            await self.server.keep_document_client(client_id)
        except ClientMetadataError as err:
            problem = f"The client's metadata document can no longer be used: {err}"
            return await self._page(request, request_id, client_id, data, expected, problem, 400)
        try:
            code, data = await anyio.to_thread.run_sync(self.server.approve, request_id, approver.principal)
        except ValueError:
            return _gone()
        target = construct_redirect_uri(data["redirect_uri"], code=code, state=data.get("state"), iss=data["issuer"])
        return _redirect(target, data["redirect_uri"])

    def _pending(self, request_id: str) -> tuple[str, dict[str, Any]] | None:
        found = self.server.store.find(request_id, "request") if request_id else None
        if found is None or found.used_at is not None or found.expires_at < time.time():
            return None
        return found.client_id, found.data

    def _approver(self, request: Request, key: str, space: str) -> Caller:
        """Who approves: an admin key of the space (or the owner's token), or the keyless local owner.

        Raises:
            AfiError: no key where one is needed, a refused key, or a key that may not approve.
        """
        door: Door = request.app.state.afi
        caller = door.admit(
            authorization=f"Bearer {key}" if key else None,
            address=request.client.host if request.client else "unknown",
            host=request.headers.getlist("host"),
            origin=request.headers.getlist("origin"),
        )
        if not caller.has("afi:admin") or caller.resource is not None or caller.principal.startswith("jwt:"):
            raise Forbidden(
                "approving needs an admin API key (afi token create --scope afi:admin) or the owner's token"
            )
        if caller.principal != "local" and caller.space != space:
            raise Forbidden(f"this admin key is bound to the space {caller.space!r}, not {space!r}")
        return caller

    async def _deny(self, request_id: str, client_id: str, data: dict[str, Any]) -> Response:
        def deny() -> bool:
            used = self.server.store.use(request_id, "request")
            if used:
                self.server.record("anonymous", data["space"], "oauth.grant", client_id, "denied")
            return used

        if not await anyio.to_thread.run_sync(deny):
            return _gone()
        target = construct_redirect_uri(
            data["redirect_uri"], error="access_denied", error_description="the owner denied the request",
            state=data.get("state"), iss=data["issuer"],
        )  # fmt: skip
        return _redirect(target, data["redirect_uri"])

    async def _page(
        self, request: Request, request_id: str, client_id: str, data: dict[str, Any], csrf: str, problem: str | None,
        status: int,
    ) -> HTMLResponse:  # fmt: skip
        client = await self.server.get_client(client_id)
        door: Door = request.app.state.afi
        keyless = not (await anyio.to_thread.run_sync(door.provider.manifest)).auth.get("required", True)
        html = render_consent(
            client_name=(client.client_name if client and client.client_name else "An unnamed client"),
            client_id=client_id, redirect_uri=data["redirect_uri"], space=data["space"], resource=data["resource"],
            scopes=data["scopes"], action=CONSENT_PATH, request_id=request_id, csrf=csrf, problem=problem,
            keyless=keyless, document_host=urlsplit(client_id).hostname if is_document_client(client_id) else None,
        )  # fmt: skip
        return HTMLResponse(html, status_code=status, headers=consent_headers(data["redirect_uri"]))


def _invalid_client(problem: str, status: int) -> JSONResponse:
    error = {"error": "invalid_client", "error_description": problem}
    return JSONResponse(error, status_code=status, headers={"Cache-Control": "no-store"})


def _gone() -> HTMLResponse:
    body = "<!DOCTYPE html><title>afi-memory</title><p>This authorization request is unknown, expired or decided."
    return HTMLResponse(body, status_code=400, headers=consent_headers("about:blank"))


def _redirect(target: str, redirect_uri: str) -> RedirectResponse:
    return RedirectResponse(target, status_code=303, headers=consent_headers(redirect_uri))


def mount_oauth(app: Starlette, server: AfiAuthorizationServer | None, *, issuer: str | None = None) -> None:
    """Serve the built-in authorization server on ``app`` (None: only name ``issuer`` in the metadata)."""
    name_servers(app, issuer=issuer, builtin=server is not None)
    if server is not None:
        app.router.routes[0:0] = OAuthRoutes(server).routes()
