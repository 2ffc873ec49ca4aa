"""``search`` over one space's tree: x-conversation, semantic, or grep (exact, regex) through the candidate cache."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from afi.model import ConversationQuery, MatchPage, SearchRequest, query_mode
from afi.paths import is_within, normalize

from ..tree.base import check_limit
from ..workspace.file_index import SEARCH_REFRESH
from .candidates import CandidateCache, candidates, load_texts
from .conversation import conversation_matches
from .grep import GrepSource, grep
from .semantic import semantic

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["MAX_RESULTS", "Search"]

MAX_RESULTS = 1000


class Search:
    """The search verb of every space of a provider; holds the grep candidate cache they share."""

    def __init__(self, manifest: Callable[[], bytes]) -> None:
        self.cache = CandidateCache()
        self._manifest = manifest

    def run(self, name: str, space: Space, request: SearchRequest) -> MatchPage:
        """Run ``request`` in the space ``name``; return one page of matches."""
        scope = normalize(request.path)
        limit = check_limit(request.limit, MAX_RESULTS)
        if isinstance(request.query, ConversationQuery):
            return conversation_matches(space.ledger, request.query, min(limit, 100))
        if query_mode(request.query) == "semantic":
            return semantic(space, request, scope, limit)
        source = GrepSource(
            candidates=lambda literals: candidates(self.cache, name, space, literals, scope, self._manifest),
            load=lambda batch: load_texts(space, batch),
            catch_up=(lambda after: _catch_up(space, scope, after)) if _overlaps_files(scope) else None,
        )
        return grep(source, request, scope, limit)


def _overlaps_files(scope: str) -> bool:
    return is_within(scope, "/files") or is_within("/files", scope)


def _catch_up(space: Space, scope: str, after: str) -> str | None:
    """Bring the index in line with the disk for the workspace files of ``scope`` from the path ``after``
    on, within the search's budget; return the first path it did not get to (None: it got to the end)."""
    if not after.startswith("/files/"):
        if after > "/files/":
            return None  # every workspace file is before this page
        after = "/files/"
    within = scope.removeprefix("/files").strip("/") if is_within(scope, "/files") else ""
    left = space.workspace.catch_up(within, after.removeprefix("/files/"), SEARCH_REFRESH)
    return None if left is None else f"/files/{left}"
