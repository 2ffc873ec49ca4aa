"""The narrow core interface: what a provider answers, and who is asking.

Bindings translate their transport into these synchronous calls and render the result or the
:class:`~afi.errors.AfiError`. A binding never imports a provider's internals; a provider never
imports a binding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .errors import Forbidden
from .model import DeleteResult, Entry, Manifest, MatchPage, Page, ReadResult, SearchRequest

__all__ = ["SCOPES", "Caller", "Provider"]

SCOPES = ("afi:read", "afi:write", "afi:admin")


@dataclass(frozen=True)
class Caller:
    """Who asks: a principal, the one space it is bound to, and the scopes it holds.

    ``afi:admin`` implies ``afi:write``, which implies ``afi:read``.
    """

    principal: str
    space: str = "default"
    scopes: frozenset[str] = field(default_factory=lambda: frozenset(SCOPES))

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
