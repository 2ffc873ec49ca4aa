"""The AFI data shapes (docs/afi.md): Entry, Match, SearchQuery, ReadResult, Page, Manifest.

Vendor fields are spelled ``x-…`` on the wire; in Python they are ``x_…`` attributes with an alias.
Serialise with :func:`dump` so aliases are used and absent optional fields are left out.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "AFI_VERSION",
    "EOF_HEADER",
    "MTIME_HEADER",
    "SIZE_HEADER",
    "ConversationQuery",
    "DeleteResult",
    "Entry",
    "EntryType",
    "Manifest",
    "Match",
    "MatchContext",
    "MatchPage",
    "Page",
    "ReadResult",
    "RegexQuery",
    "SearchMode",
    "SearchQuery",
    "SearchRequest",
    "SemanticQuery",
    "Truncated",
    "dump",
    "query_mode",
    "rfc3339",
]

AFI_VERSION = "0.1"

# The HTTP binding's read answers carry what the raw body cannot: whether the file ended, its whole
# size and its modification time.
EOF_HEADER = "X-AFI-EOF"
SIZE_HEADER = "X-AFI-Size"
MTIME_HEADER = "X-AFI-Mtime"

EntryType = Literal["file", "directory", "symlink"]
SearchMode = Literal["exact", "regex", "semantic", "x-conversation"]


def rfc3339(moment: datetime | float) -> str:
    """Given a datetime or a POSIX timestamp, return RFC 3339 UTC with millisecond precision."""
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, UTC)
    elif moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Wire(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class Entry(_Wire):
    """What ``stat`` returns and ``list`` returns many of."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    path: str
    type: EntryType
    size: int = 0
    mtime: str
    ctime: str
    content_type: str
    etag: str | None = None
    target: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)


class Page(_Wire):
    """One page of ``list``: direct children sorted by path, and a cursor when more remain."""

    entries: list[Entry]
    next_cursor: str | None = None


class ReadResult(_Wire):
    """The answer to ``read``: the bytes asked for, their content type, and whether the file ended."""

    data: bytes
    content_type: str
    eof: bool
    size: int = 0
    etag: str | None = None
    mtime: str | None = None


class MatchContext(_Wire):
    before: list[str] = Field(default_factory=list)
    after: list[str] = Field(default_factory=list)


class Match(_Wire):
    """One search hit: a line of a file, or (semantic mode) a note with its score and explanation."""

    path: str
    line: int
    column: int | None = None
    text: str
    context: MatchContext | None = None
    score: float | None = None
    x_explain: dict[str, Any] | None = Field(default=None, alias="x-explain")
    x_id: str | None = Field(default=None, alias="x-id")
    x_kind: str | None = Field(default=None, alias="x-kind")


class Truncated(_Wire):
    """Ours, as ``x-truncated`` on a page of ``search``: the page's work budget ran out (``reason``:
    ``"time"`` or ``"bytes"``) before it held ``limit`` matches or reached the end. Searched so far:
    ``line`` lines of ``path`` (``offset`` bytes into it); not yet: the rest of it and the documents
    after it, ``remaining`` in all, ``path`` included. ``next_cursor`` goes on from there.
    ``"index"``: files put on disk behind the store's back from ``path`` on are not indexed yet (each
    page indexes a slice of them); ``remaining`` counts the indexed documents from there, and the next
    pages search the rest as they index it."""

    reason: Literal["time", "bytes", "index"]
    path: str
    line: int
    offset: int
    remaining: int


class MatchPage(_Wire):
    """One page of ``search``; ``x-truncated`` when its work budget cut it short."""

    matches: list[Match]
    next_cursor: str | None = None
    x_truncated: Truncated | None = Field(default=None, alias="x-truncated")
    # ours, on a semantic page: notes written moments ago whose vectors are still being made, found
    # by this search only through their words
    x_vectors_pending: int | None = Field(default=None, alias="x-vectors-pending")


class RegexQuery(_Wire):
    regex: str
    flags: str = ""


class SemanticQuery(_Wire):
    semantic: str
    threshold: float | None = None


class ConversationQuery(_Wire):
    """Our ``x-conversation`` mode: search one session's transcript by query-term coverage; each match
    carries the branch page around the message (``page_limit`` messages, 1..100)."""

    conversation: str
    session: str
    page_limit: int = 20
    direction: Literal["backward", "forward"] = "backward"
    detail: Literal["summary", "full"] = "summary"


SearchQuery = str | RegexQuery | SemanticQuery | ConversationQuery


def query_mode(query: SearchQuery) -> SearchMode:
    """Given a search query, return its mode."""
    if isinstance(query, str):
        return "exact"
    if isinstance(query, RegexQuery):
        return "regex"
    if isinstance(query, ConversationQuery):
        return "x-conversation"
    return "semantic"


class SearchRequest(_Wire):
    """A ``search`` call: the query, where to look, paging, and our ``x-`` options."""

    query: SearchQuery
    path: str = "/"
    limit: int = 100
    cursor: str | None = None
    context_lines: int = Field(default=0, alias="x-context")
    kinds: list[str] | None = Field(default=None, alias="x-kinds")
    as_of: str | None = Field(default=None, alias="x-as-of")
    budget: int | None = Field(default=None, alias="x-budget")

    @field_validator("query", mode="before")
    @classmethod
    def _pick_mode(cls, value: Any) -> Any:
        if isinstance(value, dict):
            if "regex" in value:
                return RegexQuery.model_validate(value)
            if "semantic" in value:
                return SemanticQuery.model_validate(value)
            if "conversation" in value:
                return ConversationQuery.model_validate(value)
            raise ValueError("a query object needs 'regex', 'semantic' or 'conversation'")
        return value


class DeleteResult(_Wire):
    deleted: int


class Manifest(BaseModel):
    """The provider's self-description, served at ``/.afi/manifest.json``; ``x-*`` fields allowed."""

    model_config = ConfigDict(extra="allow")

    afi_version: str = AFI_VERSION
    provider: str
    provider_version: str
    profile: int
    capabilities: list[str]
    search: dict[str, Any]
    path: dict[str, Any]
    auth: dict[str, Any]


def dump(model: BaseModel) -> dict[str, Any]:
    """Given a wire model, return its JSON-ready dict (aliases, no ``None`` fields)."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
