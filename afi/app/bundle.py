"""``afi export`` and ``afi import`` wired: the store's provider, as its local owner, handed to the
bundle's writer and reader, or to the importers of what users already have (Markdown, Obsidian, the
MCP memory server's JSONL, mem0, Claude's ``/memories``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .local import local_owner, open_provider

__all__ = ["export_spaces", "import_source"]

Progress = Callable[[str, int, int], None]  # (stage, done, total)


def export_spaces(db: Path | str, root: Path, out: Path, *, spaces: list[str] | None, as_of: str | None,
                  progress: Progress) -> dict[str, Any]:  # fmt: skip
    """Given the store, write its spaces (or those named, as they stood at ``as_of``) as a bundle folder
    at ``out``; return the bundle's manifest."""
    from afi.providers.memory.bundle import export_bundle

    manifest: dict[str, Any] = export_bundle(open_provider(db, root), out, local_owner, spaces=spaces, as_of=as_of,
                                             progress=progress)  # fmt: skip
    return manifest


def import_source(db: Path | str, root: Path, source: Path, *, fmt: str | None, space: str | None,
                  progress: Progress) -> Any:  # fmt: skip
    """Given the store and a source (``fmt``: ``"bundle"``, a foreign format's name, or None to tell
    them apart), import it: a bundle into empty spaces (``space``: where its only space goes), anything
    else into ``space`` (default: default). Return what was done; its ``summary()`` says it in a line.

    Raises:
        InvalidPath / Unsupported: the source is not whole, not the format, or a record is broken;
        nothing is written then.
    """
    from afi.providers.memory.bundle import import_bundle, is_bundle
    from afi.providers.memory.importers import import_foreign

    provider = open_provider(db, root)
    if fmt == "bundle" or (fmt is None and is_bundle(source)):
        return import_bundle(provider, source, local_owner, space=space, progress=progress)
    result = import_foreign(provider, source, fmt=fmt, space=space or "default",
                            progress=lambda done, total: progress("import", done, total))  # fmt: skip
    # a sentence embedder's vectors are made after the writes: made here, with their own bar
    provider.fabric(space or "default").fill_vectors(lambda done, total: progress("meaning vectors", done, total))
    return result
