"""``afi sync`` wired: this store's space and the remote's, each through its provider as its local
owner, handed to the sync (:mod:`afi.providers.memory.sync`).

The remote is another store reached here: a SQLite file (a path or ``sqlite:///…``) or a PostgreSQL
URL, opened with the workspace root it recorded (or its default); or an ``afi serve`` URL, reached
through its HTTP door's sync routes with a key that holds ``afi:admin`` on the space.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from afi.clients.http import HttpClient

from .local import local_owner, open_provider
from .workspace import workspace_root

__all__ = ["SyncSession", "peers_of", "sync_stores"]


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
                dry_run: bool, token: str | None = None, progress: Any = None) -> Any:  # fmt: skip
    """Given this store, a remote (another store, or an ``afi serve`` URL reached with ``token``) and a
    space, bring the space in step on both (or one way); return the
    :class:`~afi.providers.memory.sync.SyncReport`."""
    with SyncSession(db, root, remote, space=space, token=token) as session:
        return session.sync(pull=pull, push=push, dry_run=dry_run, progress=progress)


class SyncSession:
    """This store's space and a remote's, opened once for many syncs (``afi sync --watch``). After a
    failed sync, :meth:`reset` drops the remote's connections; the next sync opens them again."""

    def __init__(self, db: Path | str, root: Path, remote: Path | str, *, space: str,
                 token: str | None = None) -> None:  # fmt: skip
        self.db, self.root, self.remote, self.space, self.token = db, root, remote, space, token
        self._local: Any = None
        self._other: Any = None
        self._client: HttpClient | None = None

    @property
    def where(self) -> str:
        """The remote as this store records it (a URL without its password)."""
        return _label(self.remote)

    def __enter__(self) -> SyncSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.reset()

    def sync(self, *, pull: bool, push: bool, dry_run: bool = False, progress: Any = None) -> Any:
        """One sync of the space (see :func:`sync_stores`)."""
        from afi.providers.memory.sync import sync

        local, other = self._endpoints()
        return sync(local, other, pull=pull, push=push, dry_run=dry_run, progress=progress)

    def reset(self) -> None:
        """Drop the remote's connections (an HTTP client's, another store's provider)."""
        if self._client is not None:
            self._client.close()
        self._client = self._other = None

    def _endpoints(self) -> tuple[Any, Any]:
        from afi.providers.memory.sync import LocalEndpoint

        if self._local is None:
            self._local = LocalEndpoint(open_provider(self.db, self.root), local_owner(self.space), _label(self.db))
        if self._other is None:
            remote = self.remote
            if str(remote).startswith(("http://", "https://")):
                self._client = HttpClient(str(remote), self.token, space=self.space, timeout=300)
                self._other = _HttpEndpoint(self._client, _label(self.db))
            else:
                there = open_provider(remote, workspace_root(remote, None, create=True))
                self._other = LocalEndpoint(there, local_owner(self.space), _label(remote))
        return self._local, self._other


class _HttpEndpoint:
    """A space of a store behind an ``afi serve`` door (``afi:admin`` on it), as one side of a sync."""

    def __init__(self, client: HttpClient, here: str) -> None:
        self.client = client
        self.label = client.base_url
        self.here = here  # how the server records this store

    def identity(self) -> str:
        return self.client.sync_store()

    def read(self, *, since: int, peer: str) -> Any:
        from afi.providers.memory.sync import Batch

        return Batch.from_json(self.client.sync_changes(since=since, peer=peer))

    def received(self, peer: str) -> int:
        return self.client.sync_received(peer)

    def apply(self, batch: Any, *, label: str) -> Any:
        from afi.providers.memory.sync import Applied

        return Applied.from_json(self.client.sync_apply(batch.to_json(), label=self.here))

    def read_files(self, *, since: int, peer: str) -> Any:
        from afi.providers.memory.sync import FileBatch

        return FileBatch.from_json(self.client.sync_changes(since=since, peer=peer, stream="files"))

    def received_files(self, peer: str) -> int:
        return self.client.sync_received(peer, stream="files")

    def apply_files(self, batch: Any, *, label: str) -> Any:
        from afi.providers.memory.sync import FilesApplied

        return FilesApplied.from_json(self.client.sync_apply(batch.to_json(), label=self.here, stream="files"))

    def read_ledger(self, *, since: int, peer: str) -> Any:
        from afi.providers.memory.sync import LedgerBatch

        return LedgerBatch.from_json(self.client.sync_changes(since=since, peer=peer, stream="ledger"))

    def received_ledger(self, peer: str) -> int:
        return self.client.sync_received(peer, stream="ledger")

    def apply_ledger(self, batch: Any, *, label: str) -> Any:
        from afi.providers.memory.sync import LedgerApplied

        return LedgerApplied.from_json(self.client.sync_apply(batch.to_json(), label=self.here, stream="ledger"))

    def read_state(self) -> Any:
        from afi.providers.memory.sync import SpaceState

        return SpaceState.from_json(self.client.sync_state())

    def apply_state(self, state: Any) -> Any:
        from afi.providers.memory.sync import StateApplied

        return StateApplied.from_json(self.client.sync_apply_state(state.to_json()))


def peers_of(db: Path | str, root: Path, space: str | None = None) -> list[Any]:
    """The stores each space (or one) of this store has synced with, most recent first."""
    return list(open_provider(db, root).sync_peers(space))
