"""The memory provider: the memory fabric on SQLite, the tree it shows, and the file jail."""

from __future__ import annotations

from .errors import (
    MemoryConflictError,
    MemoryLimitError,
    MemoryNotAttachedError,
    MemoryNotFoundError,
    MemoryScopeError,
    MemoryValidationError,
)
from .jail import FileJail
from .types import ExplainRow, ForgetResult, MemoryNote, RecallHit, RecallResult

__all__ = [
    "ExplainRow",
    "FileJail",
    "ForgetResult",
    "MemoryConflictError",
    "MemoryLimitError",
    "MemoryNotAttachedError",
    "MemoryNotFoundError",
    "MemoryNote",
    "MemoryScopeError",
    "MemoryValidationError",
    "RecallHit",
    "RecallResult",
]
