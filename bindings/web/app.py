"""The web page at ``/``: server-rendered views of the memory, over the HTTP app's own door and verbs.

Each view admits the request through the same :class:`~afi.auth.door.Door` as the API (so the
keyless loopback owner reads with no JavaScript at all), calls the provider's verbs for that caller
in a worker thread, and renders a Jinja2 template (autoescaped). A page's script (``static/app.js``)
re-fetches a view with the ``X-AFI-Fragment: 1`` header and the tab's API key as a Bearer header,
and swaps in the answer: only the inside of ``<div id="app">``. Writes never go through these
routes: the script calls the JSON API (``/afi/write`` with ``If-Match``, ``/afi/delete``,
``/afi/move``, ``/keys``). Every answer carries a Content-Security-Policy without inline script.
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Callable
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from afi.bindings.http.door import Served, caller_of
from afi.errors import HTTP_STATUS, AfiError, Forbidden, InvalidPath, NotFound
from afi.provider import Caller, Provider

from ..offload import offload, search_lane
from . import views
from .search import search

__all__ = ["FRAGMENT_HEADER", "WEB_CSP", "mount_web", "router"]

FRAGMENT_HEADER = "x-afi-fragment"
WEB_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
_HERE = Path(__file__).parent
_STATIC = {"app.js": "text/javascript", "app.css": "text/css"}
_HEADERS = {
    "Content-Security-Policy": WEB_CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
PathQ = Annotated[str, Query(max_length=4096, description="an AFI path")]
_HEADINGS = {
    "unauthorized": "An API key is needed",
    "forbidden": "Not allowed",
    "not_found": "Not found",
    "invalid_path": "That request was not valid",
}


def _size(n: int | None) -> str:
    if n is None:
        return ""
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB"):
        n_ = n / 1024
        if n_ < 1024 or unit == "GiB":
            return f"{n_:.1f} {unit}"
        n = int(n_)
    return f"{n} B"


def _when(stamp: str | None) -> str:
    """An RFC 3339 UTC stamp as a person reads it (to the second); the raw text when it does not parse."""
    if not stamp:
        return ""
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        return stamp


@functools.cache
def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(_HERE / "templates"), autoescape=True, undefined=StrictUndefined)
    env.filters["size"] = _size
    env.filters["when"] = _when
    env.globals["h"] = views.href
    return env


def _me(caller: Caller | None) -> dict[str, Any] | None:
    if caller is None:
        return None
    return {
        "principal": caller.principal,
        "space": caller.space,
        "scopes": sorted(caller.scopes),
        "write": caller.has("afi:write"),
        "admin": caller.has("afi:admin"),
    }


def _render(request: Request, context: dict[str, Any], caller: Caller | None, status: int = 200) -> HTMLResponse:
    fragment = request.headers.get(FRAGMENT_HEADER) == "1"
    layout = "fragment.html" if fragment else "base.html"
    html = _environment().get_template(context["template"]).render(**context, layout=layout, me=_me(caller))
    headers = {**_HEADERS, "Cache-Control": "no-store", "Vary": "Authorization, X-AFI-Fragment"}
    return HTMLResponse(html, status_code=status, headers=headers)


async def _page(request: Request, build: Callable[..., dict[str, Any]], limiter: Any = None, **kw: Any) -> HTMLResponse:
    """Admit the request, build the view's context for that caller in a worker thread, and render it
    (an AFI error as the error page, with its status)."""
    caller: Caller | None = None
    try:
        caller = await offload(caller_of, request)
        context = await offload(build, caller, limiter=limiter, **kw)
    except AfiError as err:
        status = HTTP_STATUS.get(err.code, 500)
        heading = _HEADINGS.get(err.code, "The request failed")
        context = {"template": "error.html", "title": heading, "heading": heading, "error": err}
        return _render(request, context, caller, status)
    return _render(request, context, caller)


def _edit_context(provider: Provider, who: Caller, path: str) -> dict[str, Any]:
    entry = provider.stat(who, path)
    if entry.type != "file":
        raise InvalidPath("only a file can be edited here", path=path)
    if not who.has("afi:write") or "w" not in str(entry.attributes.get("permissions", "")):
        raise Forbidden(f"{path} cannot be written with this key", path=path)
    data = provider.read(who, path).data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidPath("this file is not UTF-8 text; the page edits text only", path=path) from None
    return {"template": "edit.html", "title": f"Edit {path}", "path": path, "folder": views.parent(path),
            "etag": entry.etag, "text": text, "create": False}  # fmt: skip


def _new_context(provider: Provider, who: Caller, folder: str) -> dict[str, Any]:
    entry = provider.stat(who, folder)
    if entry.type != "directory" or not who.has("afi:write") or "w" not in str(entry.attributes.get("permissions")):
        raise Forbidden(f"nothing can be created in {folder} with this key", path=folder)
    return {"template": "edit.html", "title": f"New in {folder}", "path": "", "folder": entry.path,
            "etag": None, "text": "", "create": True}  # fmt: skip


router = APIRouter(include_in_schema=False)


@router.get("/")
async def root(request: Request, provider: Served) -> HTMLResponse:
    return await _page(request, lambda who: views.browse(provider, who, "/", None))


@router.get("/ui/browse")
async def browse(request: Request, provider: Served, path: PathQ = "/", cursor: str | None = None) -> HTMLResponse:
    return await _page(request, lambda who: views.browse(provider, who, path or "/", cursor))


@router.get("/ui/asof")
async def asof(request: Request, at: Annotated[str, Query(max_length=200)] = "", path: PathQ = "/") -> Response:
    if not at.strip() or "/" in at:
        err = InvalidPath("name an instant (ISO 8601, e.g. 2025-06-01T12:00:00Z) or a snapshot")
        context = {"template": "error.html", "title": "No instant", "heading": "No instant", "error": err}
        return _render(request, context, None, 400)
    below = path if path.startswith("/") and not path.startswith("/.afi") else "/"
    where = f"/.afi/at/{at.strip()}" + ("" if below == "/" else below)
    return RedirectResponse(views.href("browse", path=where), status_code=303, headers=_HEADERS)


@router.get("/ui/edit")
async def edit(request: Request, provider: Served, path: PathQ) -> HTMLResponse:
    return await _page(request, partial(_edit_context, provider), path=path)


@router.get("/ui/new")
async def new(request: Request, provider: Served, folder: PathQ = "/facts") -> HTMLResponse:
    return await _page(request, partial(_new_context, provider), folder=folder)


@router.get("/ui/search")
async def search_page(
    request: Request,
    provider: Served,
    q: Annotated[str, Query(max_length=4096)] = "",
    mode: str = "exact",
    path: PathQ = "/",
    as_of: str = "",
    flags: Annotated[str, Query(max_length=8)] = "",
) -> HTMLResponse:
    return await _page(
        request, lambda who: search(provider, who, q, mode, path, as_of or None, flags), limiter=search_lane()
    )


@router.get("/ui/ledger")
async def ledger(request: Request, provider: Served) -> HTMLResponse:
    return await _page(request, lambda who: views.ledger(provider, who))


@router.get("/ui/audit")
async def audit(request: Request, provider: Served, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> HTMLResponse:
    return await _page(request, lambda who: views.audit(provider, who, limit))


@router.get("/ui/keys")
async def keys(request: Request, provider: Served) -> HTMLResponse:
    return await _page(request, lambda who: views.keys(provider, who))


@router.get("/ui/static/{name}")
async def static(name: str) -> FileResponse:
    if name not in _STATIC:
        raise NotFound(f"no asset {name!r}", path=f"/ui/static/{name}")
    headers = {**_HEADERS, "Cache-Control": "no-cache"}
    return FileResponse(_HERE / "static" / posixpath.basename(name), media_type=_STATIC[name], headers=headers)


def mount_web(app: FastAPI) -> None:
    """Add the web page to an app of :func:`~afi.bindings.http.create_app` (whose door it admits through
    and whose provider it reads): ``/``, the views under ``/ui/``, their assets under ``/ui/static/``."""
    app.include_router(router)
