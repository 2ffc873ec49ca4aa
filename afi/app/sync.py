"""``afi sync`` wired: this store's space and the remote's, each through its provider as its local
owner, handed to the sync (:mod:`afi.providers.memory.sync`).

The remote is another store reached here: a SQLite file (a path or ``sqlite:///…``) or a PostgreSQL
URL, opened with the workspace root it recorded (or its default). ``afi serve`` URLs come through
the HTTP door (not yet: refused with a message that says so).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from afi.errors import Unsupported

from .local import local_owner, open_provider
from .workspace import workspace_root

__all__ = ["peers_of", "sync_stores"]


def _label(db: Path | str) -> str:
    """Where a store is, as its peers record it: the host and the file, or the URL without its password."""
    text = str(db)
    if "://" in text and "@" in text:
        scheme, rest = text.split("://", 1)
        credentials, host = rest.rsplit("@", 1)
        text = f"{scheme}://{credentials.split(':', 1)[0]}@{host}"
    elif "://" not in text:
        text = f"{socket.gethostname()}:{Path(text).resolve()}"
    return text


def sync_stores(db: Path | str, root: Path, remote: Path | str, *, space: str, pull: bool, push: bool,
                dry_run: bool, progress: Any = None) -> Any:  # fmt: skip
    """Given this store, a remote store and a space, bring the space in step on both (or one way);
    return the :class:`~afi.providers.memory.sync.SyncReport`."""
    from afi.providers.memory.sync import LocalEndpoint, sync

    if str(remote).startswith(("http://", "https://")):
        raise Unsupported("syncing with an afi serve URL is not built yet: sync with its store (a path or a "
                          "postgresql:// URL)", path=str(remote))  # fmt: skip
    local = LocalEndpoint(open_provider(db, root), local_owner(space), _label(db))
    there = open_provider(remote, workspace_root(remote, None, create=True))
    other = LocalEndpoint(there, local_owner(space), _label(remote))
    return sync(local, other, pull=pull, push=push, dry_run=dry_run, progress=progress)


def peers_of(db: Path | str, root: Path, space: str | None = None) -> list[Any]:
    """The stores each space (or one) of this store has synced with, most recent first."""
    return list(open_provider(db, root).sync_peers(space))
