"""``/.afi``: the provider's own files, read-only: ``manifest.json``, the manifest the doors serve, and
``at/<instant>/``, the notes and workspace files as they stood at an instant (:mod:`.at`).

The manifest is built once per state of ``auth.required`` (which follows keys created while serving,
the only part that changes) and kept with its bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from afi.errors import NotFound
from afi.manifest import build_manifest
from afi.model import Entry, Manifest, Page, ReadResult

from ..fabric.embedders import Embedder
from ..search.search import MAX_RESULTS
from .at import AT_ROOT, AtPath, at_list, at_read, at_stat, at_text, parse_at
from .base import MAX_LIST, Area, Listing
from .entries import manifest_entry
from .locate import MANIFEST_NAME, Node

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["PROVIDER_NAME", "PROVIDER_VERSION", "AfiArea", "memory_manifest"]

PROVIDER_NAME = "afi-memory"
PROVIDER_VERSION = "0.1.0"


class AfiArea(Area):
    """``/.afi/manifest.json``, given how to build the manifest and whether auth is required now."""

    def __init__(self, build: Callable[[bool], Manifest], auth_required: Callable[[], bool]) -> None:
        self._build = build
        self._auth_required = auth_required
        self._built: dict[bool, tuple[Manifest, bytes]] = {}

    def manifest(self) -> Manifest:
        return self._current()[0]

    def body(self) -> bytes:
        return self._current()[1]

    def _current(self) -> tuple[Manifest, bytes]:
        required = self._auth_required()
        cached = self._built.get(required)
        if cached is None:
            manifest = self._build(required)
            body = (json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n").encode()
            cached = self._built[required] = (manifest, body)
        return cached

    def children(self, space: Space) -> list[Entry]:
        return [at_stat(space, AtPath("", "", "", ""), AT_ROOT), manifest_entry(self.body())]

    def stat(self, space: Space, node: Node) -> Entry:
        where = parse_at(node.path, space)
        return super().stat(space, node) if where is None else at_stat(space, where, node.path)

    def list(self, space: Space, node: Node, listing: Listing) -> Page:
        where = parse_at(node.path, space)
        return super().list(space, node, listing) if where is None else at_list(space, where, node.path, listing)

    def read(self, space: Space, node: Node, offset: int, length: int | None) -> ReadResult:
        where = parse_at(node.path, space)
        found = None if where is None else at_read(space, where, node.path, offset, length)
        return super().read(space, node, offset, length) if found is None else found

    def text(self, space: Space, node: Node) -> tuple[Entry, str]:
        where = parse_at(node.path, space)
        if where is not None:
            return at_text(space, where, node.path)
        if node.rest != MANIFEST_NAME:
            raise NotFound("no such file", path=node.path)
        body = self.body()
        return manifest_entry(body), body.decode()


def memory_manifest(auth_required: bool, *, embedder: Embedder, file_max_bytes: int, extra: dict[str, Any]) -> Manifest:
    """The memory provider's manifest: profile 3, its search modes, note kinds, embedder and limits."""
    return build_manifest(
        provider=PROVIDER_NAME,
        provider_version=PROVIDER_VERSION,
        capabilities=["stat", "list", "read", "search", "write", "mkdir", "delete", "move"],
        search_modes=["exact", "regex", "semantic"],
        max_results=MAX_RESULTS,
        auth_required=auth_required,
        auth_methods=["bearer"],
        extra={
            "x-note-kinds": ["fact", "procedure", "file", "working", "episode"],
            "x-search-modes": ["x-conversation"],
            "x-embedder": {"name": embedder.name, "dims": embedder.dims},
            "x-limits": {"list_max": MAX_LIST, "search_max_results": MAX_RESULTS, "file_max_bytes": file_max_bytes},
            **extra,
        },
    )
