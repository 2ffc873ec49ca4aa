"""An AFI client that calls a provider in-process."""

from __future__ import annotations

from typing import Any

from ..model import (
    MatchPage,
    SearchQuery,
    SearchRequest,
)
from ..provider import BoundVerbs
from .base import as_search_request

__all__ = ["LocalClient"]


class LocalClient(BoundVerbs):
    """An :class:`AfiClient` that calls a provider in-process, as ``caller``."""

    def search(self, request_or_query: SearchRequest | SearchQuery | dict[str, Any], **kw: Any) -> MatchPage:
        return self.provider.search(self.caller, as_search_request(request_or_query, **kw))
