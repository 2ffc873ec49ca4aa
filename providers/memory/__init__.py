"""The memory provider: the memory fabric on SQLite, the tree it shows, and the file jail.

Its rooms: ``fabric/`` (the engine), ``ledger/`` (the observational ledger), ``workspace/`` (the jailed
files), ``tree/`` (one handler per area of the tree) and ``search/``; ``provider.py`` puts them behind
the AFI verbs. This package exports what a host uses; the rooms' modules are importable too.
"""

from __future__ import annotations

from .fabric.attach import Attachment
from .fabric.context import ContextProvider
from .fabric.embedders import Embedder, HashEmbedder, embedder_from_name
from .fabric.errors import (
    MemoryConflictError,
    MemoryLimitError,
    MemoryNotAttachedError,
    MemoryNotFoundError,
    MemoryScopeError,
    MemoryValidationError,
)
from .fabric.fabric import MemoryFabric, create_memory_fabric
from .fabric.invariants import case_conclusions_not_procedures
from .fabric.memory import FusionSettings, Memory, MemoryLimits, create_memory, space_memory
from .fabric.onnx_minilm import OnnxMiniLM
from .fabric.repoint import create_deletion_propagator, create_fabric_repoint_handler, repoint_source
from .fabric.store import Store
from .fabric.tools import ToolDefinition
from .fabric.types import ExplainRow, ForgetResult, MemoryNote, NoteLink, RecallHit, RecallResult, Scope
from .ledger.ledger import Ledger, LedgerSession, create_ledger
from .tools import create_fabric_tools
from .workspace.jail import FileJail

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
    "OnnxMiniLM",
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
    "embedder_from_name",
    "repoint_source",
    "space_memory",
]
