"""The AFI verbs of one caller, as the shell uses them: the provider's, with the caller bound.

The shell speaks only through :class:`Verbs`, so it can be driven by anything with these methods
(tests hand it a fake); :class:`CallerVerbs` is the real one, over a :class:`~afi.provider.Provider`.
"""

from __future__ import annotations

from typing import Any, Protocol

from afi.errors import InvalidPath
from afi.model import DeleteResult, Entry, Manifest, MatchPage, Page, ReadResult, SearchRequest
from afi.provider import BoundVerbs

__all__ = ["CallerVerbs", "Verbs"]


class Verbs(Protocol):
    """The verbs the shell calls, already bound to its caller."""

    def manifest(self) -> Manifest: ...

    def stat(self, path: str) -> Entry: ...

    def list(self, path: str, *, limit: int = 1000, cursor: str | None = None, glob: str | None = None) -> Page: ...

    def read(self, path: str, *, offset: int = 0, length: int | None = None) -> ReadResult: ...

    def search(
        self, query: str | dict[str, Any], *, path: str = "/", limit: int = 100, cursor: str | None = None
    ) -> MatchPage: ...

    def write(self, path: str, data: bytes, *, append: bool = False, create_only: bool = False) -> Entry: ...

    def mkdir(self, path: str, *, parents: bool = False) -> Entry: ...

    def delete(self, path: str, *, recursive: bool = False) -> DeleteResult: ...

    def move(self, source: str, destination: str, *, overwrite: bool = False) -> Entry: ...


class CallerVerbs(BoundVerbs):
    """:class:`Verbs` that call ``provider`` in-process as ``caller``."""

    def search(
        self, query: str | dict[str, Any], *, path: str = "/", limit: int = 100, cursor: str | None = None
    ) -> MatchPage:
        try:
            request = SearchRequest.model_validate({"query": query, "path": path, "limit": limit, "cursor": cursor})
        except ValueError as err:
            raise InvalidPath(f"bad search request: {err}") from None
        return self.provider.search(self.caller, request)
