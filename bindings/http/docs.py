"""``/docs`` that works offline: Swagger UI from the app's own files, and a bearer scheme to Authorize with.

FastAPI's own page loads Swagger UI from a CDN (a blank page without internet) and starts it with an
inline script. Here the assets come from the ``fastapi-offline`` package (it bundles Swagger UI's
``swagger-ui-bundle.js`` and ``swagger-ui.css``), served under ``/docs/static/``; the page starts it
with ``docs.js``, so the Content-Security-Policy allows no inline script. The OpenAPI document
declares ``Authorization: Bearer`` (optional: a keyless loopback owner sends none), so Swagger UI's
Authorize button takes an API key.
"""

from __future__ import annotations

from html import escape
from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, HTMLResponse

from afi.errors import NotFound

__all__ = ["DOCS_CSP", "add_docs"]

DOCS_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
_ASSETS = {
    "swagger-ui-bundle.js": ("swagger", "application/javascript"),
    "swagger-ui.css": ("swagger", "text/css"),
    "favicon.png": ("swagger", "image/png"),
    "docs.js": ("own", "application/javascript"),
}
_HEADERS = {
    "Content-Security-Policy": DOCS_CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def _asset(name: str) -> Path:
    where, _ = _ASSETS[name]
    folder = files("fastapi_offline") / "static" if where == "swagger" else files(__package__ or "") / "static"
    return Path(str(folder / name))


def _page(title: str, openapi_url: str) -> str:
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} – API docs</title>
<link rel="stylesheet" href="/docs/static/swagger-ui.css">
<link rel="icon" href="/docs/static/favicon.png">
</head>
<body data-openapi="{escape(openapi_url)}">
<div id="swagger-ui"></div>
<script src="/docs/static/swagger-ui-bundle.js"></script>
<script src="/docs/static/docs.js"></script>
</body>
</html>
"""


def add_docs(app: FastAPI) -> None:
    """Serve ``/docs`` from local assets and declare the bearer scheme in ``app``'s OpenAPI document.

    ``app`` must be built with ``docs_url=None`` and ``redoc_url=None`` (FastAPI's own pages use a CDN).
    """
    openapi_url = app.openapi_url or "/openapi.json"

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, summary=app.summary, description=app.description,
                routes=app.routes,
            )  # fmt: skip
            components = schema.setdefault("components", {})
            components.setdefault("securitySchemes", {})["bearer"] = {
                "type": "http",
                "scheme": "bearer",
                "description": "an API key (afi token create), or none for the keyless owner on loopback",
            }
            schema["security"] = [{"bearer": []}, {}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(_page(app.title, openapi_url), headers=_HEADERS)

    @app.get("/docs/static/{name}", include_in_schema=False)
    async def docs_asset(name: str) -> FileResponse:
        if name not in _ASSETS:
            raise NotFound(f"no docs asset {name!r}", path=f"/docs/static/{name}")
        headers = {**_HEADERS, "Cache-Control": "public, max-age=3600"}
        return FileResponse(_asset(name), media_type=_ASSETS[name][1], headers=headers)
