"""The memory fabric's errors: each is an AfiError, so every binding maps it without a special case.

MemoryError_ (base, never raised itself)
├── MemoryValidationError   invalid_path  bad input: kind, field, id, label, timestamp, jail path
├── MemoryLimitError        too_large     over max_entry_text_chars, max_file_bytes, a byte budget
├── MemoryScopeError        forbidden     a composition across scopes, or a foreign session
├── MemoryNotAttachedError  forbidden     a tool called for a session the fabric was not attached to
├── MemoryNotFoundError     not_found     an id, block, observation or reflection that is not there
└── MemoryConflictError     conflict      a versioned write lost its race, or a name is taken
"""

from __future__ import annotations

from afi.errors import Conflict, Forbidden, InvalidPath, NotFound, TooLarge

__all__ = [
    "MemoryConflictError",
    "MemoryLimitError",
    "MemoryNotAttachedError",
    "MemoryNotFoundError",
    "MemoryScopeError",
    "MemoryValidationError",
]


class MemoryValidationError(InvalidPath):
    """Bad input to the fabric; the message names the field and what it accepts."""


class MemoryLimitError(TooLarge):
    """Input over a configured cap; nothing was written."""


class MemoryScopeError(Forbidden):
    """An operation that would cross memory scopes or sessions."""


class MemoryNotAttachedError(Forbidden):
    """A governed tool or worker was used without an attached session."""


class MemoryNotFoundError(NotFound):
    """The note, block, observation or reflection does not exist in this scope."""


class MemoryConflictError(Conflict):
    """A concurrent writer changed the value first, or the target already exists."""
