"""Reading imported notes back the way a user does: ``read`` of ``/facts/<name>.md``, its front matter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider

OWNER = Caller(principal="local", space="default")


def provider_on(tmp_path: Path) -> MemoryProvider:
    return MemoryProvider(tmp_path / "store" / "afi.db", tmp_path / "store" / "files")


def note(provider: MemoryProvider, path: str) -> tuple[dict[str, Any], str]:
    """The front matter and content of the note at ``path``."""
    text = provider.read(OWNER, path).data.decode()
    _, head, body = text.split("---\n", 2)
    front = yaml.safe_load(head)
    assert isinstance(front, dict)
    return front, body


def names(provider: MemoryProvider, folder: str) -> list[str]:
    return sorted(e.path for e in provider.list(OWNER, folder).entries)


def links(provider: MemoryProvider, path: str) -> dict[str, str]:
    """The note's links as {target path: relation}, targets found by id under /facts and /procedures."""
    by_id = {}
    for folder in ("/facts", "/procedures"):
        for entry in provider.list(OWNER, folder).entries:
            by_id[note(provider, entry.path)[0]["id"]] = entry.path
    return {by_id[link["id"]]: link["relation"] for link in note(provider, path)[0].get("links", [])}
