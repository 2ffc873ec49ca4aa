"""Importers from what users already have: a Markdown folder or Obsidian vault, the MCP reference
memory server's knowledge graph, a mem0 export, and a Claude memory-tool ``/memories`` directory.

:func:`import_foreign` detects the format (:mod:`.detect`), reads the whole source into a plan
(one module per format), checks every record against the store's rules, and only then writes it
through the provider's verbs (:mod:`.write`).
"""

from __future__ import annotations

from .detect import FORMATS, detect
from .foreign import import_foreign
from .report import ImportReport

__all__ = ["FORMATS", "ImportReport", "detect", "import_foreign"]
