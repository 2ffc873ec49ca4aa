"""The HTTP/JSON binding (docs/afi.md, "HTTP/JSON"): parse the request, call one verb in a worker thread, render.

Routes answer at the root (the key's own space) and again under ``/spaces/{space}/``, where a key
bound to another space is refused at the door with 401 ``invalid_token``. Errors are
``{"error": {code, message, path?, retry_after?}}`` with the status of :data:`afi.errors.HTTP_STATUS`.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from afi.auth.door import Door, InvalidToken
from afi.auth.oauth.resource import advertised_scopes
from afi.auth.ratelimit import RateLimiter
from afi.errors import HTTP_STATUS, AfiError, Internal, InvalidPath, NotFound, Unauthorized
from afi.model import EOF_HEADER, MTIME_HEADER, SIZE_HEADER, DeleteResult, Entry, MatchPage, Page, SearchRequest, dump
from afi.provider import Caller, Provider

from ..offload import offload, search_lane
from .docs import add_docs
from .errors import BodyCap, Cors, Utf8Url, error_response
from .oauth import named_servers

__all__ = ["DEFAULT_MAX_BODY_BYTES", "caller_of", "create_app"]

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
METADATA_PATH = "/.well-known/oauth-protected-resource"
_RANGE = re.compile(r"^bytes=([0-9]*)-([0-9]*)$")
_BEYOND = 10**18  # past any file; a longer number is not parsed (int() refuses over 4,300 digits)
_STATUS_CODE = {status: code for code, status in HTTP_STATUS.items()}


_InvalidToken = InvalidToken


class MkdirBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    parents: bool = False


class MoveBody(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    from_: str = Field(alias="from")
    to: str
    overwrite: bool = False


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
    if token_sent or isinstance(err, _InvalidToken):
        parts.append('error="invalid_token",')
    parts.append(f'resource_metadata="{metadata}", scope="afi:read afi:write"')
    return " ".join(parts)


def _byte_range(header: str, size: int) -> tuple[int, int] | None:
    """Given a Range header and the file's size, return the first and last byte it asks for.

    None when the header is not one ``bytes=first-last`` range (the whole file is sent, as RFC 9110
    allows); raises ValueError for one the file cannot satisfy.
    """
    match = _RANGE.match(header.strip())
    if match is None or not (match.group(1) or match.group(2)):
        return None
    first, last = (int(g or 0) if len(g) < 19 else _BEYOND for g in match.groups())
    if match.group(1):
        start, end = first, min(last, size - 1) if match.group(2) else size - 1
    else:  # a suffix: the last ``last`` bytes
        start, end = max(size - last, 0), size - 1 if last else -1
    if start >= size or end < start:
        raise ValueError(f"the range {header[:64]!r} is not satisfiable: the file has {size} bytes")
    return start, end


def _etag(value: str | None) -> str | None:
    if value is None:
        return None
    return value if value.startswith(('"', 'W/"')) else f'"{value}"'


def _same_version(if_range: str, etag: str | None) -> bool:
    """Given an If-Range value and the file's ETag, return whether the range may be served: only for
    the same strong ETag (a date or a weak tag never matches: this binding sends no Last-Modified)."""
    sent = if_range.strip()
    return etag is not None and not etag.startswith("W/") and sent == etag


def _unquote(value: str) -> str:
    value = value.strip()
    if value.startswith("W/"):
        value = value[2:]
    return value.strip('"')


def _json(model: BaseModel, status: int = 200) -> JSONResponse:
    return JSONResponse(dump(model), status_code=status)


def caller_of(request: Request) -> Caller:
    """Given a request, return who asks (runs in a worker thread: the key store is SQLite)."""
    door: Door = request.app.state.afi
    return door.admit(
        authorization=request.headers.get("authorization"),
        query_keys=request.query_params.keys(),
        address=request.client.host if request.client else "unknown",
        url_space=request.path_params.get("space"),
        host=request.headers.getlist("host"),
        origin=request.headers.getlist("origin"),
    )


async def _current_caller(request: Request) -> Caller:
    return await offload(caller_of, request)


Who = Annotated[Caller, Depends(_current_caller)]
PathQ = Annotated[str, Query(description="absolute AFI path, e.g. /facts/x.md")]


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
    )
    add_docs(app)

    app.state.afi = Door(
        provider, rate_limit, frozenset(allowed_spaces) if allowed_spaces is not None else None, default_space
    )

    @app.exception_handler(AfiError)
    async def _afi_error(request: Request, err: AfiError) -> JSONResponse:
        headers: dict[str, str] = {}
        if isinstance(err, Unauthorized):
            sent = request.headers.get("authorization") is not None
            headers["WWW-Authenticate"] = _challenge(request, err, sent)
        return error_response(err, headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
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

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, err: ClientDisconnect) -> Response:
        return Response(status_code=400)  # never sent: the client left while its body was being read

    @app.exception_handler(Exception)
    async def _bug(request: Request, err: Exception) -> JSONResponse:
        return error_response(Internal(f"the server failed: {type(err).__name__}"))  # then logged, as a bug

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, err: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: {e.get('msg')}"
            for e in err.errors()
        )
        return error_response(InvalidPath(f"bad request: {problems}"))

    router = APIRouter()

    @router.get("/.afi/manifest.json", summary="The manifest", tags=["discovery"])
    async def manifest(request: Request) -> JSONResponse:
        """The provider's manifest, plus what this binding adds: its limits and where it answers."""
        data = dump(await offload(provider.manifest))
        limits = dict(data.get("x-limits") or {})
        limits["max_body_bytes"] = max_body_bytes
        if rate_limit is not None:
            limits["rate"] = rate_limit.describe()
        data["x-limits"] = limits
        bindings = dict(data.get("x-bindings") or {})
        bindings["http"] = str(request.base_url).rstrip("/")
        data["x-bindings"] = bindings
        return JSONResponse(data)

    @router.api_route(
        "/afi/stat", methods=["GET", "HEAD"], response_model=Entry, summary="stat: one entry", tags=["discovery"]
    )
    async def stat(who: Who, path: PathQ) -> JSONResponse:
        return _json(await offload(provider.stat, who, path))

    @router.get("/afi/list", response_model=Page, summary="list: direct children, sorted", tags=["discovery"])
    async def list_(
        who: Who, path: PathQ, limit: int = 1000, cursor: str | None = None, glob: str | None = None
    ) -> JSONResponse:
        return _json(await offload(provider.list, who, path, limit=limit, cursor=cursor, glob=glob))

    @router.api_route(
        "/afi/read",
        methods=["GET", "HEAD"],
        summary="read: raw bytes (Range, If-Range, ETag/If-None-Match honoured; HEAD: the headers only)",
        tags=["read"],
        response_class=Response,
        responses={200: {"content": {"application/octet-stream": {}}}, 206: {"description": "partial content"}},
    )
    async def read(
        who: Who,
        path: PathQ,
        offset: int = 0,
        length: int | None = None,
        range_: Annotated[str | None, Header(alias="Range")] = None,
        if_none_match: Annotated[str | None, Header()] = None,
        if_range: Annotated[str | None, Header()] = None,
    ) -> Response:
        status, content_range = 200, None
        if range_ and _RANGE.match(range_.strip()):
            entry = await offload(provider.stat, who, path)
            size = entry.size
            if if_range is not None and not _same_version(if_range, _etag(entry.etag)):
                range_ = ""  # RFC 9110 13.1.5: the file changed since the client's copy, so all of it
            try:
                asked = _byte_range(range_, size)
            except ValueError as refused:
                err = InvalidPath(str(refused), path=path)
                return error_response(err, {"Content-Range": f"bytes */{size}"}, status=416)
            if asked is not None:
                offset, end = asked
                length, status, content_range = end - offset + 1, 206, f"bytes {offset}-{end}/{size}"
        result = await offload(provider.read, who, path, offset=offset, length=length)
        headers = {"Accept-Ranges": "bytes", EOF_HEADER: "true" if result.eof else "false"}
        headers[SIZE_HEADER] = str(result.size)
        if result.mtime:
            headers[MTIME_HEADER] = result.mtime
        etag = _etag(result.etag)
        if etag:
            headers["ETag"] = etag
            if if_none_match and (
                if_none_match.strip() == "*" or _unquote(etag) in {_unquote(t) for t in if_none_match.split(",")}
            ):
                return Response(status_code=304, headers=headers)
        if content_range:
            headers["Content-Range"] = content_range
        headers["Content-Type"] = result.content_type  # as the provider says it; Starlette would add a charset
        return Response(result.data, status_code=status, headers=headers)

    @router.post("/afi/search", response_model=MatchPage, summary="search: exact, regex or semantic", tags=["search"])
    async def search(who: Who, request: Annotated[SearchRequest, Body()]) -> JSONResponse:
        return _json(await offload(provider.search, who, request, limiter=search_lane()))

    @router.put(
        "/afi/write",
        response_model=Entry,
        summary="write: the raw body to a path (If-Match for optimistic concurrency)",
        tags=["write"],
        openapi_extra={"requestBody": {"content": {"application/octet-stream": {}}, "required": True}},
    )
    async def write(
        request: Request,
        who: Who,
        path: PathQ,
        append: bool = False,
        create_only: bool = False,
        offset: int | None = None,
        if_match: Annotated[str | None, Header()] = None,
    ) -> JSONResponse:
        chunks = [chunk async for chunk in request.stream()]
        data = b"".join(chunks)
        entry = await offload(
            partial(provider.write, who, path, data),
            offset=offset,
            append=append,
            create_only=create_only,
            if_match=if_match.strip() if if_match else None,
        )
        return _json(entry)

    @router.post("/afi/mkdir", response_model=Entry, summary="mkdir (parents optional)", tags=["write"])
    async def mkdir(who: Who, body: MkdirBody) -> JSONResponse:
        return _json(await offload(provider.mkdir, who, body.path, parents=body.parents))

    @router.delete("/afi/delete", response_model=DeleteResult, summary="delete (forget a note)", tags=["write"])
    async def delete(who: Who, path: PathQ, recursive: bool = False) -> JSONResponse:
        return _json(await offload(provider.delete, who, path, recursive=recursive))

    @router.post("/afi/move", response_model=Entry, summary="move / rename", tags=["write"])
    async def move(who: Who, body: MoveBody) -> JSONResponse:
        return _json(await offload(provider.move, who, body.from_, body.to, overwrite=body.overwrite))

    app.include_router(router)
    app.include_router(router, prefix="/spaces/{space}")
    from .admin import admin_router  # these modules import this one's door helpers
    from .ledger import ledger_router

    for extra in (ledger_router(provider), admin_router(provider)):
        app.include_router(extra)
        app.include_router(extra, prefix="/spaces/{space}")

    async def resource_metadata(request: Request) -> JSONResponse:
        """RFC 9728 protected-resource metadata: which resource this is and how to present a key."""
        base = str(request.base_url).rstrip("/")
        space = request.path_params.get("space")
        if space is not None and allowed_spaces is not None and space not in allowed_spaces:
            raise NotFound(f"this server does not serve the space {space!r}")
        return JSONResponse(
            {
                "resource": base + (f"/spaces/{space}" if space else ""),
                "resource_name": "afi-memory",
                "scopes_supported": advertised_scopes(request.app),
                "bearer_methods_supported": ["header"],
                **named_servers(request.app, base),
            }
        )

    app.add_api_route(METADATA_PATH, resource_metadata, methods=["GET"], tags=["discovery"])
    app.add_api_route(METADATA_PATH + "/spaces/{space}", resource_metadata, methods=["GET"], tags=["discovery"])
    if cors:
        app.add_middleware(
            Cors,
            allow_origins=["*"],
            allow_methods=["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", "If-Match", "If-None-Match", "If-Range", "Range"],
            expose_headers=[
                "ETag",
                "Content-Range",
                "Accept-Ranges",
                "Retry-After",
                "WWW-Authenticate",
                EOF_HEADER,
                SIZE_HEADER,
                MTIME_HEADER,
            ],
            max_age=600,
        )
    app.add_middleware(BodyCap, cap=max_body_bytes)
    app.add_middleware(Utf8Url)
    return app
