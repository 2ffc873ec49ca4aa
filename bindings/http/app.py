"""The HTTP/JSON binding (docs/afi.md, "HTTP/JSON"): parse the request, call one verb in a worker thread, render.

Routes answer at the root (the key's own space) and again under ``/spaces/{space}/``, where a key
bound to another space is refused at the door with 401 ``invalid_token``. Errors are
``{"error": {code, message, path?, retry_after?}}`` with the status of :data:`afi.errors.HTTP_STATUS`.
:func:`create_app` only assembles: the routes are the module-level routers of :mod:`.routes`,
:mod:`.ledger` and :mod:`.admin`, which reach the provider through ``app.state`` (:mod:`.door`).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from afi.auth.door import Door, InvalidToken
from afi.auth.ratelimit import RateLimiter
from afi.errors import HTTP_STATUS, AfiError, Internal, InvalidPath, Unauthorized
from afi.model import EOF_HEADER, MTIME_HEADER, SIZE_HEADER
from afi.provider import Provider

from .admin import router as admin_router
from .conflicts import router as conflicts_router
from .docs import add_docs
from .errors import BodyCap, Cors, Utf8Url, error_response
from .ledger import router as ledger_router
from .notes import router as notes_router
from .routes import METADATA_PATH, metadata_router
from .routes import router as afi_router
from .sync import router as sync_router

__all__ = ["DEFAULT_MAX_BODY_BYTES", "create_app"]

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
_STATUS_CODE = {status: code for code, status in HTTP_STATUS.items()}


class ErrorBody(BaseModel):
    code: str
    message: str
    path: str | None = None
    retry_after: float | None = None


class ErrorEnvelope(BaseModel):
    error: ErrorBody


def _challenge(request: Request, err: AfiError, token_sent: bool) -> str:
    base = str(request.base_url).rstrip("/")
    space = request.path_params.get("space")
    metadata = base + METADATA_PATH + (f"/spaces/{space}" if space else "")
    parts = ["Bearer"]
    if token_sent or isinstance(err, InvalidToken):
        parts.append('error="invalid_token",')
    parts.append(f'resource_metadata="{metadata}", scope="afi:read afi:write"')
    return " ".join(parts)


async def _afi_error(request: Request, err: AfiError) -> Response:
    headers: dict[str, str] = {}
    if isinstance(err, Unauthorized):
        sent = request.headers.get("authorization") is not None
        headers["WWW-Authenticate"] = _challenge(request, err, sent)
    return error_response(err, headers)


async def _http_error(request: Request, err: StarletteHTTPException) -> Response:
    code = _STATUS_CODE.get(err.status_code, "internal" if err.status_code >= 500 else "invalid_path")
    message = str(err.detail)
    if err.status_code == 404:
        message = f"no route {request.url.path}; AFI routes live under /afi/ and /.afi/manifest.json"
    elif err.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    elif isinstance(err.__cause__, UnicodeDecodeError):  # FastAPI's "error parsing the body"
        bad = err.__cause__
        byte = f"byte {bad.object[bad.start]:#04x} at offset {bad.start}"
        message = f"the request body is not UTF-8 ({byte}); a JSON body is UTF-8 text"
    body: dict[str, Any] = {"code": code, "message": message}
    return JSONResponse({"error": body}, status_code=err.status_code)


async def _gone(request: Request, err: ClientDisconnect) -> Response:
    return Response(status_code=400)  # never sent: the client left while its body was being read


async def _bug(request: Request, err: Exception) -> Response:
    return error_response(Internal(f"the server failed: {type(err).__name__}"))  # then logged, as a bug


async def _bad_request(request: Request, err: RequestValidationError) -> Response:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: {e.get('msg')}" for e in err.errors()
    )
    return error_response(InvalidPath(f"bad request: {problems}"))


_HANDLERS: dict[Any, Any] = {  # each handler takes the exception it is registered for
    AfiError: _afi_error,
    StarletteHTTPException: _http_error,
    ClientDisconnect: _gone,
    Exception: _bug,
    RequestValidationError: _bad_request,
}
_EXPOSED = ["ETag", "Content-Range", "Accept-Ranges", "Retry-After", "WWW-Authenticate", EOF_HEADER, SIZE_HEADER,
            MTIME_HEADER]  # fmt: skip


def create_app(
    provider: Provider,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    rate_limit: RateLimiter | None = None,
    cors: bool = True,
    allowed_spaces: set[str] | frozenset[str] | None = None,
    default_space: str | None = None,
) -> FastAPI:
    """Given a provider, return the FastAPI app serving it over HTTP/JSON.

    Args:
        max_body_bytes: bodies over this answer 413 before they are read whole.
        rate_limit: a limiter keyed by principal (or by address for refused credentials).
        cors: allow any origin (tokens travel in a header, never in cookies).
        allowed_spaces: when given, only these spaces are served; another is 401 ``invalid_token``.
        default_space: the space the keyless local owner works in at the root routes.
    """
    app = FastAPI(
        title="afi-memory",
        summary="An agent's memory as a filesystem: the AFI v0.1 HTTP/JSON binding.",
        version="0.1",
        responses={"default": {"model": ErrorEnvelope, "description": "an AFI error"}},
        docs_url=None,  # add_docs serves /docs from local assets; FastAPI's loads them from a CDN
        redoc_url=None,
        exception_handlers=_HANDLERS,
    )
    add_docs(app)
    spaces = frozenset(allowed_spaces) if allowed_spaces is not None else None
    app.state.afi = Door(provider, rate_limit, spaces, default_space)
    app.state.afi_max_body_bytes = max_body_bytes
    for router in (afi_router, ledger_router, notes_router, sync_router, conflicts_router, admin_router):
        app.include_router(router)
        app.include_router(router, prefix="/spaces/{space}")
    app.include_router(metadata_router)
    if cors:
        app.add_middleware(
            Cors,
            allow_origins=["*"],
            allow_methods=["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", "If-Match", "If-None-Match", "If-Range", "Range"],
            expose_headers=_EXPOSED,
            max_age=600,
        )
    app.add_middleware(BodyCap, cap=max_body_bytes)
    app.add_middleware(Utf8Url)
    return app
