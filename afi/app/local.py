"""The store as the local owner sees it: the provider, its fabric and ledger, opened for one command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from afi.auth.keys import KeyStore
from afi.auth.oauth.issuer import IssuerConfig, IssuerVerifier
from afi.provider import Caller
from afi.providers.memory import MemoryNotFoundError, create_memory_fabric, space_memory
from afi.providers.memory.fabric.types import MemoryNote, RecallResult
from afi.providers.memory.ledger.conversation import render_transcript
from afi.providers.memory.ledger.ledger import create_ledger
from afi.providers.memory.provider import MemoryProvider

__all__ = [
    "MemoryNote",
    "MemoryProvider",
    "RecallResult",
    "local_owner",
    "open_fabric",
    "open_provider",
    "session_ids",
    "session_transcript",
]


def open_provider(
    db: Path | str,
    root: Path,
    *,
    keys: bool = False,
    manifest_extra: dict[str, Any] | None = None,
    issuer: IssuerConfig | None = None,
) -> MemoryProvider:
    """Given the store file and the workspace root, return the memory provider over them.

    Args:
        keys: let API keys in (a server's door); without, only the local owner and explicit callers.
        manifest_extra: fields added to the manifest (the mount announces itself there).
        issuer: with ``keys``, an identity provider whose JWT access tokens are let in too.
    """
    kw: dict[str, Any] = {}
    if keys:
        kw["keys"] = KeyStore(db, issuer=IssuerVerifier(issuer) if issuer is not None else None)
    if manifest_extra is not None:
        kw["manifest_extra"] = manifest_extra
    return MemoryProvider(db, root, **kw)


def local_owner(space: str) -> Caller:
    """The local owner of ``space``: whoever runs the CLI on this machine (and can read the store file)."""
    return Caller(principal="local", space=space)


def open_fabric(db: Path | str, space: str) -> Any:
    """Given the store file and a space, return that space's memory fabric (remember, recall, forget)."""
    return create_memory_fabric(space_memory(db, space))


def session_transcript(db: Path | str, space: str, session: str) -> str:
    """Return the text of ``/sessions/<session>.md``; not_found when the space has no such session."""
    found = create_ledger(db, space=space).find_session(session)
    if found is None:
        raise MemoryNotFoundError(f"no such session: {session}", path=f"/sessions/{session}.md")
    text: str = render_transcript(found)
    return text


def session_ids(db: Path | str, space: str) -> list[str]:
    """Return the ids of the space's sessions."""
    return list(create_ledger(db, space=space).sessions())
