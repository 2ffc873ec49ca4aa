"""The HTTP door's refusals: the AFI error body, and the middleware that answers with it before a route runs.

Every refusal is ``{"error": {code, message, path?, retry_after?}}`` with the status of
:data:`afi.errors.HTTP_STATUS` (or a more precise one: 416 for a range, the preflight's 400).
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from afi.errors import HTTP_STATUS, AfiError, InvalidPath, TooLarge

__all__ = ["BodyCap", "Cors", "Utf8Url", "error_response", "not_utf8"]


def error_response(err: AfiError, headers: dict[str, str] | None = None, status: int | None = None) -> JSONResponse:
    """Given an AfiError, return its JSON answer (``Retry-After`` added when the error carries one)."""
    extra = dict(headers or {})
    if err.retry_after is not None:
        extra["Retry-After"] = str(max(1, round(err.retry_after + 0.499)))
    return JSONResponse({"error": err.to_dict()}, status_code=status or HTTP_STATUS.get(err.code, 500), headers=extra)


class _BodyTooLarge(HTTPException):
    def __init__(self, cap: int) -> None:
        super().__init__(413, f"the request body is over the {cap}-byte cap")


class BodyCap:
    """ASGI middleware: refuse a body over the cap by its Content-Length, and count while it streams."""

    def __init__(self, app: ASGIApp, cap: int) -> None:
        self.app = app
        self.cap = cap

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.cap:
                await error_response(TooLarge(f"the request body is over the {self.cap}-byte cap"))(
                    scope, receive, send
                )
                return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.cap:
                    raise _BodyTooLarge(self.cap)
            return message

        await self.app(scope, counted, send)


class Cors(CORSMiddleware):
    """CORS, where a refused preflight gets the AFI error body like every other refusal."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        kept = {k: v for k, v in response.headers.items() if k.startswith("access-control-") or k == "vary"}
        return error_response(InvalidPath(bytes(response.body).decode()), kept, status=response.status_code)


class Utf8Url:
    """ASGI middleware: refuse a URL whose path or query is not UTF-8 once percent-decoded (400 ``invalid_path``).

    Starlette decodes a query with ``errors="replace"`` and uvicorn a path the same way, so
    ``?path=/files/bad%FF.txt`` reached the verbs as ``/files/bad\\uFFFD.txt``, a name the client never
    sent, and a file was stored under it. Every route of the app (``/afi``, ``/spaces``, ``/ledger``,
    ``/mcp``, the web page, OAuth) is behind this check.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = _query_refusal(scope.get("query_string", b"")) or _path_refusal(scope.get("raw_path") or b"")
            if refusal is not None:
                await error_response(refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def not_utf8(raw: bytes) -> str | None:
    """Given percent-encoded bytes, return them decoded with each byte that is not UTF-8 shown as
    ``\\xNN``; None when they are UTF-8."""
    data = unquote_to_bytes(raw)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("utf-8", "backslashreplace")
    return None


def _query_refusal(query: bytes) -> InvalidPath | None:
    for pair in query.split(b"&"):
        name, _, value = (part.replace(b"+", b" ") for part in pair.partition(b"="))
        shown = not_utf8(value)
        if shown is None and not_utf8(name) is None:
            continue
        label = unquote_to_bytes(name).decode("utf-8", "backslashreplace")
        if shown is not None and label == "path":
            return InvalidPath(
                "the path is not UTF-8 once percent-decoded (a byte that is not is shown as \\xNN); "
                "AFI paths are UTF-8 text",
                path=shown[:256],
            )
        return InvalidPath(f"the query parameter {label[:64]!r} is not UTF-8 once percent-decoded")
    return None


def _path_refusal(raw_path: bytes) -> InvalidPath | None:
    shown = not_utf8(raw_path)
    if shown is None:
        return None
    return InvalidPath(f"the URL path {shown[:200]!r} is not UTF-8 once percent-decoded; URLs here are UTF-8 text")
