"""afi-memory: an AFI provider that exposes an AI agent's memory as a virtual filesystem.

The import name ``afi`` holds the AFI contract every part shares; the memory provider ships as
``afi.providers.memory`` and the four bindings as ``afi.bindings``.
"""

from __future__ import annotations

from .errors import (
    AfiError,
    Conflict,
    Forbidden,
    Internal,
    InvalidPath,
    NotFound,
    RateLimited,
    TooLarge,
    Unauthorized,
    Unsupported,
)
from .model import (
    DeleteResult,
    Entry,
    Manifest,
    Match,
    MatchPage,
    Page,
    ReadResult,
    RegexQuery,
    SearchQuery,
    SearchRequest,
    SemanticQuery,
)
from .provider import Caller, Provider

__version__ = "0.1.0"

__all__ = [
    "AfiError",
    "Caller",
    "Conflict",
    "DeleteResult",
    "Entry",
    "Forbidden",
    "Internal",
    "InvalidPath",
    "Manifest",
    "Match",
    "MatchPage",
    "NotFound",
    "Page",
    "Provider",
    "RateLimited",
    "ReadResult",
    "RegexQuery",
    "SearchQuery",
    "SearchRequest",
    "SemanticQuery",
    "TooLarge",
    "Unauthorized",
    "Unsupported",
    "__version__",
]
