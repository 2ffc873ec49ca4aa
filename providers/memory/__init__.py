"""The memory provider: the memory fabric on SQLite, the tree it shows, and the file jail."""

from __future__ import annotations

from .attach import Attachment
from .context import ContextProvider
from .embedders import Embedder, HashEmbedder
from .errors import (
    MemoryConflictError,
    MemoryLimitError,
    MemoryNotAttachedError,
    MemoryNotFoundError,
    MemoryScopeError,
    MemoryValidationError,
)
from .fabric import MemoryFabric, create_memory_fabric
from .invariants import case_conclusions_not_procedures
from .jail import FileJail
from .ledger import Ledger, LedgerSession, create_ledger
from .memory import FusionSettings, Memory, MemoryLimits, create_memory, space_memory
from .repoint import create_deletion_propagator, create_fabric_repoint_handler, repoint_source
from .store import Store
from .tools import ToolDefinition, create_fabric_tools
from .types import ExplainRow, ForgetResult, MemoryNote, NoteLink, RecallHit, RecallResult, Scope

__all__ = [
    "Attachment",
    "ContextProvider",
    "Embedder",
    "ExplainRow",
    "FileJail",
    "ForgetResult",
    "FusionSettings",
    "HashEmbedder",
    "Ledger",
    "LedgerSession",
    "Memory",
    "MemoryConflictError",
    "MemoryFabric",
    "MemoryLimitError",
    "MemoryLimits",
    "MemoryNotAttachedError",
    "MemoryNotFoundError",
    "MemoryNote",
    "MemoryScopeError",
    "MemoryValidationError",
    "NoteLink",
    "RecallHit",
    "RecallResult",
    "Scope",
    "Store",
    "ToolDefinition",
    "case_conclusions_not_procedures",
    "create_deletion_propagator",
    "create_fabric_repoint_handler",
    "create_fabric_tools",
    "create_ledger",
    "create_memory",
    "create_memory_fabric",
    "repoint_source",
    "space_memory",
]
