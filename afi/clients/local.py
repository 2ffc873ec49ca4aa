"""An AFI client that calls a provider in-process."""

from __future__ import annotations

from typing import Any

from ..model import (
    DeleteResult,
    Entry,
    Manifest,
    MatchPage,
    Page,
    ReadResult,
    SearchQuery,
    SearchRequest,
)
from ..provider import Caller, Provider
from .base import as_search_request

__all__ = ["LocalClient"]


class LocalClient:
    """An :class:`AfiClient` that calls a provider in-process, as ``caller``."""

    def __init__(self, provider: Provider, caller: Caller) -> None:
        self.provider = provider
        self.caller = caller

    def manifest(self) -> Manifest:
        return self.provider.manifest()

    def stat(self, path: str) -> Entry:
        return self.provider.stat(self.caller, path)

    def list(self, path: str, *, limit: int = 1000, cursor: str | None = None, glob: str | None = None) -> Page:
        return self.provider.list(self.caller, path, limit=limit, cursor=cursor, glob=glob)

    def read(self, path: str, *, offset: int = 0, length: int | None = None) -> ReadResult:
        return self.provider.read(self.caller, path, offset=offset, length=length)

    def search(self, request_or_query: SearchRequest | SearchQuery | dict[str, Any], **kw: Any) -> MatchPage:
        return self.provider.search(self.caller, as_search_request(request_or_query, **kw))

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
        return self.provider.write(
            self.caller, path, data, offset=offset, append=append, create_only=create_only, if_match=if_match
        )

    def mkdir(self, path: str, *, parents: bool = False) -> Entry:
        return self.provider.mkdir(self.caller, path, parents=parents)

    def delete(self, path: str, *, recursive: bool = False) -> DeleteResult:
        return self.provider.delete(self.caller, path, recursive=recursive)

    def move(self, source: str, destination: str, *, overwrite: bool = False) -> Entry:
        return self.provider.move(self.caller, source, destination, overwrite=overwrite)
