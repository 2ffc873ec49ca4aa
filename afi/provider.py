"""The narrow core interface: what a provider answers, and who is asking.

Bindings translate their transport into these synchronous calls and render the result or the
:class:`~afi.errors.AfiError`. A binding never imports a provider's internals; a provider never
imports a binding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .errors import Forbidden
from .model import DeleteResult, Entry, Manifest, MatchPage, Page, ReadResult, SearchRequest

__all__ = [
    "SCOPES",
    "AdminProvider",
    "BoundVerbs",
    "Caller",
    "ConflictsProvider",
    "LedgerProvider",
    "NotesProvider",
    "Provider",
    "SyncProvider",
]

SCOPES = ("afi:read", "afi:write", "afi:admin")


@dataclass(frozen=True)
class Caller:
    """Who asks: a principal, the one space it is bound to, and the scopes it holds.

    ``afi:admin`` implies ``afi:write``, which implies ``afi:read``.
    """

    principal: str
    space: str = "default"
    scopes: frozenset[str] = field(default_factory=lambda: frozenset(SCOPES))
    # the resource (RFC 8707) an OAuth access token was issued for; a door on another server refuses it
    resource: str | None = None

    def has(self, scope: str) -> bool:
        if scope in self.scopes or "afi:admin" in self.scopes:
            return True
        return scope == "afi:read" and "afi:write" in self.scopes

    def require(self, scope: str, *, path: str | None = None) -> None:
        """Raises Forbidden, naming the scope, when the caller does not hold it."""
        if not self.has(scope):
            held = ", ".join(sorted(self.scopes)) or "none"
            raise Forbidden(f"this operation needs the scope {scope} (the key holds: {held})", path=path)


@runtime_checkable
class Provider(Protocol):
    """An AFI provider at profile 3. Every method may raise :class:`~afi.errors.AfiError`."""

    def manifest(self) -> Manifest:
        """Return the manifest (the same document as ``/.afi/manifest.json``)."""
        ...

    def authenticate(self, token: str | None) -> Caller:
        """Given a bearer token (``None`` when the request had none), return the caller.

        Raises:
            Unauthorized: the token is missing where one is required, unknown, or revoked.
        """
        ...

    def stat(self, caller: Caller, path: str) -> Entry: ...

    def list(
        self,
        caller: Caller,
        path: str,
        *,
        limit: int = 1000,
        cursor: str | None = None,
        glob: str | None = None,
    ) -> Page: ...

    def read(self, caller: Caller, path: str, *, offset: int = 0, length: int | None = None) -> ReadResult: ...

    def search(self, caller: Caller, request: SearchRequest) -> MatchPage: ...

    def write(
        self,
        caller: Caller,
        path: str,
        data: bytes,
        *,
        offset: int | None = None,
        append: bool = False,
        create_only: bool = False,
        if_match: str | None = None,
    ) -> Entry: ...

    def mkdir(self, caller: Caller, path: str, *, parents: bool = False) -> Entry: ...

    def delete(self, caller: Caller, path: str, *, recursive: bool = False) -> DeleteResult: ...

    def move(self, caller: Caller, source: str, destination: str, *, overwrite: bool = False) -> Entry: ...


@runtime_checkable
class LedgerProvider(Protocol):
    """A provider that also keeps an observational ledger per session (the memory provider does); a
    binding offers the ledger's routes only to a provider of this kind."""

    def ledger_write(self, caller: Caller, op: str, session: str, body: dict[str, Any]) -> dict[str, Any]:
        """Append to a session's branch: ``op`` is one of ``append``, ``observe``, ``reflect``,
        ``scope.open``, ``scope.close``, ``bind``, and ``body`` that operation's JSON fields."""
        ...


@runtime_checkable
class NotesProvider(Protocol):
    """A provider that remembers many notes at once (the memory provider does); a binding offers the
    batch route only to a provider of this kind."""

    def remember_many(self, caller: Caller, notes: list[dict[str, Any]]) -> list[Any]:
        """Remember a batch of notes (each a mapping of ``remember``'s fields) in one transaction, all
        or nothing; return the note that now stands for each, in order (each has ``id``, ``kind``,
        ``name`` and ``supersedes``)."""
        ...


@runtime_checkable
class SyncProvider(Protocol):
    """A provider whose spaces sync with other stores' (the memory provider's do); a binding offers the
    sync routes only to a provider of this kind. Each verb needs ``afi:admin`` on the caller's space."""

    def store_id(self) -> str:
        """This store's id among the stores it syncs with."""
        ...

    def sync_changes(self, caller: Caller, *, since: int, peer: str, limit: int = ...) -> dict[str, Any]:
        """A batch of the caller's space's changes after ``since`` for the store ``peer``, as JSON."""
        ...

    def sync_received(self, caller: Caller, peer: str) -> int:
        """How far this store has applied ``peer``'s changes to the caller's space."""
        ...

    def sync_apply(self, caller: Caller, batch: Any, *, label: str) -> Any:
        """Apply a peer's batch (its JSON) to the caller's space, all or nothing; the result's
        ``to_json()`` says what changed."""
        ...

    def sync_file_changes(self, caller: Caller, *, since: int, peer: str) -> dict[str, Any]:
        """A batch of the caller's space's file versions after ``since`` for ``peer``, as JSON."""
        ...

    def sync_received_files(self, caller: Caller, peer: str) -> int:
        """How far this store has applied ``peer``'s file versions to the caller's space."""
        ...

    def sync_apply_files(self, caller: Caller, batch: Any, *, label: str) -> Any:
        """Add a peer's file versions (the batch's JSON) to the caller's space and bring their paths on
        disk; the result's ``to_json()`` says what changed."""
        ...

    def sync_ledger_changes(self, caller: Caller, *, since: int, peer: str) -> dict[str, Any]:
        """A batch of the caller's space's ledger entries after ``since`` for ``peer``, as JSON."""
        ...

    def sync_received_ledger(self, caller: Caller, peer: str) -> int:
        """How far this store has applied ``peer``'s ledger entries to the caller's space."""
        ...

    def sync_apply_ledger(self, caller: Caller, batch: Any, *, label: str) -> Any:
        """Add a peer's ledger entries (the batch's JSON) to the caller's space; the result's
        ``to_json()`` says what changed."""
        ...

    def sync_state(self, caller: Caller) -> dict[str, Any]:
        """The caller's space's working blocks and snapshots (kept and deleted), as JSON."""
        ...

    def sync_apply_state(self, caller: Caller, state: Any) -> Any:
        """Merge a peer's working blocks and snapshots (the state's JSON) into the caller's space; the
        result's ``to_json()`` says what changed."""
        ...

    def sync_status(self, caller: Caller) -> list[dict[str, Any]]:
        """The stores the caller's space has synced with, most recent first: ``store`` (its id),
        ``label`` (where it was reached), ``synced_at``, ``received`` (its last change applied here)."""
        ...


@runtime_checkable
class ConflictsProvider(Protocol):
    """A provider that says which names a sync settled and no write has answered yet (the memory
    provider does); a binding lists them only for a provider of this kind. Needs ``afi:read``."""

    def open_conflicts(self, caller: Caller) -> list[dict[str, Any]]:
        """The caller's space's open conflicts, by path: each with ``kind``, ``name``, ``path`` (where the
        name reads), ``id`` and ``history`` (the current version, which won), ``settled_at``, and
        ``losers`` (each ``id``, ``path`` in /history and ``retired_at``)."""
        ...


@runtime_checkable
class AdminProvider(Protocol):
    """A provider that shows its audit log and manages its API keys (the memory provider does).

    Each answers for the caller's own space only: the audit rows of that space (``afi:read``), and
    its keys (``afi:admin``). A key's token is returned once, by ``key_create``.
    """

    def audit_rows(self, caller: Caller, *, limit: int = 100) -> list[dict[str, Any]]: ...

    def keys_list(self, caller: Caller) -> list[dict[str, Any]]: ...

    def key_create(self, caller: Caller, scopes: list[str], name: str | None = None) -> dict[str, Any]: ...

    def key_revoke(self, caller: Caller, key_id: str) -> dict[str, Any]: ...


class BoundVerbs:
    """A provider's verbs with the caller bound: what an in-process client and the SSH shell both call.

    ``search`` is left to each user of it: the shapes its callers hand in differ.
    """

    def __init__(self, provider: Provider, caller: Caller) -> None:
        self.provider = provider
        self.caller = caller

    def manifest(self) -> Manifest:
        return self.provider.manifest()

    def stat(self, path: str) -> Entry:
        return self.provider.stat(self.caller, path)

    def list(self, path: str, *, limit: int = 1000, cursor: str | None = None, glob: str | None = None) -> Page:
        return self.provider.list(self.caller, path, limit=limit, cursor=cursor, glob=glob)

    def read(self, path: str, *, offset: int = 0, length: int | None = None) -> ReadResult:
        return self.provider.read(self.caller, path, offset=offset, length=length)

    def write(
        self,
        path: str,
        data: bytes,
        *,
        offset: int | None = None,
        append: bool = False,
        create_only: bool = False,
        if_match: str | None = None,
    ) -> Entry:
        return self.provider.write(
            self.caller, path, data, offset=offset, append=append, create_only=create_only, if_match=if_match
        )

    def mkdir(self, path: str, *, parents: bool = False) -> Entry:
        return self.provider.mkdir(self.caller, path, parents=parents)

    def delete(self, path: str, *, recursive: bool = False) -> DeleteResult:
        return self.provider.delete(self.caller, path, recursive=recursive)

    def move(self, source: str, destination: str, *, overwrite: bool = False) -> Entry:
        return self.provider.move(self.caller, source, destination, overwrite=overwrite)
