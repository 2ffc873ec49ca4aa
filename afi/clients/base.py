"""What every AFI client shares: the :class:`AfiClient` interface and how a search request is built.

The conformance kit and the CLI talk only through :class:`AfiClient`, so any binding with a
client (HTTP, MCP, FUSE, SSH, or in-process) plugs into them. Every method raises
:class:`~afi.errors.AfiError`; a request the client's transport cannot express raises
:class:`CannotExpress` (the conformance kit counts it as a skip).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..errors import InvalidPath
from ..model import (
    DeleteResult,
    Entry,
    Manifest,
    MatchPage,
    Page,
    ReadResult,
    SearchQuery,
    SearchRequest,
    dump,
)

__all__ = ["AfiClient", "CannotExpress", "as_search_request", "search_body"]


class CannotExpress(Exception):
    """The client's transport has no way to say this request (a filesystem has no ``if_match``)."""


@runtime_checkable
class AfiClient(Protocol):
    """The AFI verbs as a client sees them: the provider's, without the caller."""

    def manifest(self) -> Manifest: ...

    def stat(self, path: str) -> Entry: ...

    def list(self, path: str, *, limit: int = 1000, cursor: str | None = None, glob: str | None = None) -> Page: ...

    def read(self, path: str, *, offset: int = 0, length: int | None = None) -> ReadResult: ...

    def search(self, request_or_query: SearchRequest | SearchQuery | dict[str, Any], **kw: Any) -> MatchPage: ...

    def write(
        self,
        path: str,
        data: bytes,
        *,
        offset: int | None = None,
        append: bool = False,
        create_only: bool = False,
        if_match: str | None = None,
    ) -> Entry: ...

    def mkdir(self, path: str, *, parents: bool = False) -> Entry: ...

    def delete(self, path: str, *, recursive: bool = False) -> DeleteResult: ...

    def move(self, source: str, destination: str, *, overwrite: bool = False) -> Entry: ...


def as_search_request(request_or_query: SearchRequest | SearchQuery | dict[str, Any], **kw: Any) -> SearchRequest:
    """Given a request, or a query plus keyword options (``path``, ``limit``, ``x-…``), return a request."""
    if isinstance(request_or_query, SearchRequest):
        if kw:
            return request_or_query.model_copy(update=kw)
        return request_or_query
    fields: dict[str, Any] = {"query": request_or_query}
    for key, value in kw.items():
        fields[key.replace("_", "-") if key.startswith("x_") else key] = value
    try:
        return SearchRequest.model_validate(fields)
    except ValueError as err:
        raise InvalidPath(f"bad search request: {err}") from None


def search_body(request_or_query: SearchRequest | SearchQuery | dict[str, Any], **kw: Any) -> dict[str, Any]:
    """The wire body of a search: a query object is sent as given, so the server (not the client)
    judges its mode; anything else goes through :func:`as_search_request`."""
    if isinstance(request_or_query, dict):
        options = {key.replace("_", "-") if key.startswith("x_") else key: value for key, value in kw.items()}
        return {"query": request_or_query, **options}
    return dump(as_search_request(request_or_query, **kw))
