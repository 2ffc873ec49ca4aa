"""The AFI client over the HTTP/JSON binding."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx

from ..errors import AfiError, Internal, error_from_dict
from ..model import (
    EOF_HEADER,
    MTIME_HEADER,
    SIZE_HEADER,
    DeleteResult,
    Entry,
    Manifest,
    MatchPage,
    Page,
    ReadResult,
    SearchQuery,
    SearchRequest,
)
from .base import search_body

__all__ = ["HttpClient"]

# where each stream of a sync is served (bindings/http/sync.py)
_SYNC_STREAMS = {"notes": "/sync", "files": "/sync/files", "ledger": "/sync/ledger"}


def _flag(value: bool) -> str:
    return "true" if value else "false"


class HttpClient:
    """An :class:`AfiClient` over the HTTP/JSON binding (synchronous, httpx).

    Args:
        base_url: where the server listens, e.g. ``http://127.0.0.1:8765``.
        token: the API key, sent as ``Authorization: Bearer``; ``None`` sends none.
        space: talk to ``/spaces/<space>/…`` instead of the key's own space at the root routes.
        timeout: seconds per request.
    """

    def __init__(
        self, base_url: str, token: str | None = None, *, space: str | None = None, timeout: float = 30.0
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self.prefix = f"/spaces/{quote(space, safe='')}" if space else ""
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, method: str, route: str, **kw: Any) -> httpx.Response:
        try:
            response = self._http.request(method, self.prefix + route, **kw)
        except httpx.HTTPError as err:
            raise Internal(f"cannot reach {self.base_url}: {err}") from None
        if response.status_code >= 400:
            raise self._error(response)
        return response

    @staticmethod
    def _error(response: httpx.Response) -> AfiError:
        try:
            body = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            return error_from_dict(body["error"])
        return Internal(f"HTTP {response.status_code} without an AFI error body: {response.text[:200]}")

    # -- sync (bindings/http/sync.py): another store reading this server's changes and applying its own --

    def sync_store(self) -> str:
        """The server's store id."""
        return str(self._send("GET", "/sync/store").json()["store"])

    def sync_changes(self, *, since: int, peer: str, stream: str = "notes") -> dict[str, Any]:
        """A batch of the space's changes of ``stream`` (notes, files, ledger) after ``since`` for the
        store ``peer``, as the server sends it."""
        params = {"since": since, "peer": peer}
        data: dict[str, Any] = self._send("GET", f"{_SYNC_STREAMS[stream]}/changes", params=params).json()
        return data

    def sync_received(self, peer: str, *, stream: str = "notes") -> int:
        """How far the server has applied ``peer``'s changes of ``stream`` to the space."""
        return int(self._send("GET", f"{_SYNC_STREAMS[stream]}/received", params={"peer": peer}).json()["received"])

    def sync_apply(self, batch: dict[str, Any], *, label: str, stream: str = "notes") -> dict[str, Any]:
        """Have the server apply a batch of ``stream`` to the space; return its report."""
        path = f"{_SYNC_STREAMS[stream]}/apply"
        data: dict[str, Any] = self._send("POST", path, params={"label": label}, json=batch).json()
        return data

    def sync_state(self) -> dict[str, Any]:
        """The space's working blocks and snapshots, as the server sends them."""
        data: dict[str, Any] = self._send("GET", "/sync/state").json()
        return data

    def sync_apply_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """Have the server merge a state of blocks and snapshots into the space; return its report."""
        data: dict[str, Any] = self._send("POST", "/sync/state", json=state).json()
        return data

    def manifest(self) -> Manifest:
        return Manifest.model_validate(self._send("GET", "/.afi/manifest.json").json())

    def stat(self, path: str) -> Entry:
        return Entry.model_validate(self._send("GET", "/afi/stat", params={"path": path}).json())

    def list(self, path: str, *, limit: int = 1000, cursor: str | None = None, glob: str | None = None) -> Page:
        params: dict[str, Any] = {"path": path, "limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        if glob is not None:
            params["glob"] = glob
        return Page.model_validate(self._send("GET", "/afi/list", params=params).json())

    def read(self, path: str, *, offset: int = 0, length: int | None = None) -> ReadResult:
        params: dict[str, Any] = {"path": path, "offset": offset}
        if length is not None:
            params["length"] = length
        response = self._send("GET", "/afi/read", params=params)
        etag = response.headers.get("ETag")  # quoted, as stat and write show it
        return ReadResult(
            data=response.content,
            content_type=response.headers.get("Content-Type", "application/octet-stream"),
            eof=response.headers.get(EOF_HEADER, "true").lower() == "true",
            size=int(response.headers.get(SIZE_HEADER, len(response.content))),
            etag=etag,
            mtime=response.headers.get(MTIME_HEADER),
        )

    def search(self, request_or_query: SearchRequest | SearchQuery | dict[str, Any], **kw: Any) -> MatchPage:
        body = search_body(request_or_query, **kw)
        return MatchPage.model_validate(self._send("POST", "/afi/search", json=body).json())

    def write(
        self,
        path: str,
        data: bytes,
        *,
        offset: int | None = None,
        append: bool = False,
        create_only: bool = False,
        if_match: str | None = None,
    ) -> Entry:
        params: dict[str, Any] = {"path": path, "append": _flag(append), "create_only": _flag(create_only)}
        if offset is not None:
            params["offset"] = offset
        headers = {"Content-Type": "application/octet-stream"}
        if if_match is not None:
            headers["If-Match"] = if_match if if_match.startswith(('"', 'W/"')) else f'"{if_match}"'
        response = self._send("PUT", "/afi/write", params=params, content=data, headers=headers)
        return Entry.model_validate(response.json())

    def mkdir(self, path: str, *, parents: bool = False) -> Entry:
        return Entry.model_validate(self._send("POST", "/afi/mkdir", json={"path": path, "parents": parents}).json())

    def delete(self, path: str, *, recursive: bool = False) -> DeleteResult:
        params = {"path": path, "recursive": _flag(recursive)}
        return DeleteResult.model_validate(self._send("DELETE", "/afi/delete", params=params).json())

    def move(self, source: str, destination: str, *, overwrite: bool = False) -> Entry:
        body = {"from": source, "to": destination, "overwrite": overwrite}
        return Entry.model_validate(self._send("POST", "/afi/move", json=body).json())
