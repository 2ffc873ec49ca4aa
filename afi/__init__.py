"""afi-memory: an AFI provider that exposes an AI agent's memory as a virtual filesystem.

The import name ``afi`` holds the AFI contract every part shares; the memory provider ships as
``afi.providers.memory`` and the four bindings as ``afi.bindings``.

The names below load on first use (PEP 562): ``afi --version`` and ``afi -h`` import ``afi.cli``,
hence this package, and have no use for pydantic and the model.
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:
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

_HOME = {
    **dict.fromkeys(
        ("AfiError", "Conflict", "Forbidden", "Internal", "InvalidPath", "NotFound", "RateLimited", "TooLarge",
         "Unauthorized", "Unsupported"),
        "errors",
    ),
    **dict.fromkeys(
        ("DeleteResult", "Entry", "Manifest", "Match", "MatchPage", "Page", "ReadResult", "RegexQuery", "SearchQuery",
         "SearchRequest", "SemanticQuery"),
        "model",
    ),
    "Caller": "provider",
    "Provider": "provider",
}  # fmt: skip

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


def __getattr__(name: str) -> typing.Any:
    """Given a public name, import the module that defines it and return it (kept for next time)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'afi' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
