"""The AFI verbs over HTTP/JSON: ``/.afi/manifest.json`` and ``/afi/{stat,list,read,search,write,mkdir,delete,move}``.

Each route parses the request, calls one verb of the provider in a worker thread and renders the
answer; :data:`router` is mounted at the root and again under ``/spaces/{space}``. The provider and
the caller arrive as dependencies (:mod:`.door`).
"""

from __future__ import annotations

import re
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Body, Header, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from afi.auth.oauth.paths import METADATA_PATH
from afi.auth.oauth.resource import advertised_scopes, named_servers
from afi.errors import InvalidPath, NotFound
from afi.model import EOF_HEADER, MTIME_HEADER, SIZE_HEADER, DeleteResult, Entry, MatchPage, Page, SearchRequest, dump

from ..offload import offload, search_lane
from .door import PathQ, Served, Who, door_of
from .errors import error_response

__all__ = ["METADATA_PATH", "metadata_router", "router"]

_RANGE = re.compile(r"^bytes=([0-9]*)-([0-9]*)$")
_BEYOND = 10**18  # past any file; a longer number is not parsed (int() refuses over 4,300 digits)


class MkdirBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    parents: bool = False


class MoveBody(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    from_: str = Field(alias="from")
    to: str
    overwrite: bool = False


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


router = APIRouter()


@router.get("/.afi/manifest.json", summary="The manifest", tags=["discovery"])
async def manifest(request: Request, provider: Served) -> JSONResponse:
    """The provider's manifest, plus what this binding adds: its limits and where it answers."""
    data = dump(await offload(provider.manifest))
    limits = dict(data.get("x-limits") or {})
    limits["max_body_bytes"] = request.app.state.afi_max_body_bytes
    rate_limit = door_of(request).rate_limit
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
async def stat(provider: Served, who: Who, path: PathQ) -> JSONResponse:
    return _json(await offload(provider.stat, who, path))


@router.get("/afi/list", response_model=Page, summary="list: direct children, sorted", tags=["discovery"])
async def list_(
    provider: Served, who: Who, path: PathQ, limit: int = 1000, cursor: str | None = None, glob: str | None = None
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
    provider: Served,
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
async def search(provider: Served, who: Who, request: Annotated[SearchRequest, Body()]) -> JSONResponse:
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
    provider: Served,
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
async def mkdir(provider: Served, who: Who, body: MkdirBody) -> JSONResponse:
    return _json(await offload(provider.mkdir, who, body.path, parents=body.parents))


@router.delete("/afi/delete", response_model=DeleteResult, summary="delete (forget a note)", tags=["write"])
async def delete(provider: Served, who: Who, path: PathQ, recursive: bool = False) -> JSONResponse:
    return _json(await offload(provider.delete, who, path, recursive=recursive))


@router.post("/afi/move", response_model=Entry, summary="move / rename", tags=["write"])
async def move(provider: Served, who: Who, body: MoveBody) -> JSONResponse:
    return _json(await offload(provider.move, who, body.from_, body.to, overwrite=body.overwrite))


metadata_router = APIRouter()


@metadata_router.get(METADATA_PATH, tags=["discovery"])
@metadata_router.get(METADATA_PATH + "/spaces/{space}", tags=["discovery"])
async def resource_metadata(request: Request) -> JSONResponse:
    """RFC 9728 protected-resource metadata: which resource this is and how to present a key."""
    base = str(request.base_url).rstrip("/")
    space = request.path_params.get("space")
    allowed_spaces = door_of(request).allowed_spaces
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
