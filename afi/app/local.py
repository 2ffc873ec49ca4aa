"""The store as the local owner sees it: the provider, its fabric and ledger, opened for one command."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from afi.errors import AfiError, InvalidPath
from afi.provider import Caller
from afi.providers.memory import MemoryNotFoundError, create_memory_fabric, space_memory
from afi.providers.memory.fabric.choice import DEFAULT_EMBEDDER, EmbedderChoice
from afi.providers.memory.fabric.types import MemoryNote, RecallResult
from afi.providers.memory.provider import MemoryProvider

if TYPE_CHECKING:
    from afi.auth.oauth.issuer import IssuerConfig

__all__ = [
    "MemoryNote",
    "MemoryProvider",
    "RecallResult",
    "embedder_choice",
    "load_embedder_in_background",
    "local_owner",
    "open_fabric",
    "open_provider",
    "recall_explained",
    "restore_target",
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
    embedder: str | None = None,
) -> MemoryProvider:
    """Given the store file and the workspace root, return the memory provider over them.

    Args:
        keys: let API keys in (a server's door); without, only the local owner and explicit callers.
        manifest_extra: fields added to the manifest (the mount announces itself there).
        issuer: with ``keys``, an identity provider whose JWT access tokens are let in too.
        embedder: the embedder asked for (``--embedder``; else ``AFI_EMBEDDER``); without, the store's
            own, and for a new store the default (all-MiniLM-L6-v2).
    """
    kw: dict[str, Any] = {}
    if keys:
        from afi.auth.keys import KeyStore
        from afi.auth.oauth.issuer import IssuerVerifier

        kw["keys"] = KeyStore(db, issuer=IssuerVerifier(issuer) if issuer is not None else None)
    if manifest_extra is not None:
        kw["manifest_extra"] = manifest_extra
    return MemoryProvider(db, root, embedder=embedder_choice(embedder), **kw)


def embedder_choice(named: str | None = None) -> EmbedderChoice:
    """The embedder the ``afi`` command opens a store with: ``named`` (else ``AFI_EMBEDDER``), else the
    store's own, else the default for a new store."""
    from afi.config import embedder_choice as configured

    return EmbedderChoice(named or configured(), default=DEFAULT_EMBEDDER)


def load_embedder_in_background(provider: MemoryProvider) -> None:
    """Load the store's embedder (a sentence model: about a second) in a thread while a server answers,
    so the first write does not wait for it; a failure shows at the first write, as it would have."""

    def load() -> None:
        with contextlib.suppress(AfiError, OSError, RuntimeError):
            provider.load_embedder()

    threading.Thread(target=load, name="afi-embedder", daemon=True).start()


def local_owner(space: str) -> Caller:
    """The local owner of ``space``: whoever runs the CLI on this machine (and can read the store file)."""
    return Caller(principal="local", space=space)


def open_fabric(db: Path | str, space: str) -> Any:
    """Given the store file and a space, return that space's memory fabric (remember, recall, forget)."""
    return create_memory_fabric(space_memory(db, space, embedder=embedder_choice()))


def recall_explained(db: Path | str, space: str, query: str, **options: Any) -> RecallResult:
    """Given the store, a space, a query and the fabric's recall options (kinds, top_k, budget, as_of),
    return its recall scored as the tree search scores, so each hit shows its similarity, recency and
    importance."""
    from afi.providers.memory.search.semantic import SEARCH_SCORING

    found: RecallResult = open_fabric(db, space).recall(query, scoring=SEARCH_SCORING, **options)
    return found


def restore_target(spec: str) -> tuple[str, str]:
    """Given ``SPACE@WHEN`` (WHEN an ISO 8601 instant or a snapshot of SPACE), return the space and WHEN.

    Raises:
        InvalidPath: a bad space name, or no instant to restore to.
    """
    from afi.providers.memory.timeline import parse_target

    where = parse_target(spec)
    if where.when is None:
        raise InvalidPath(f"{spec!r}: name the instant to restore, as SPACE@WHEN (an instant or a snapshot)")
    return where.space, where.when


def session_transcript(db: Path | str, space: str, session: str) -> str:
    """Return the text of ``/sessions/<session>.md``; not_found when the space has no such session."""
    from afi.providers.memory.ledger.conversation import render_transcript
    from afi.providers.memory.ledger.ledger import create_ledger

    found = create_ledger(db, space=space).find_session(session)
    if found is None:
        raise MemoryNotFoundError(f"no such session: {session}", path=f"/sessions/{session}.md")
    text: str = render_transcript(found)
    return text


def session_ids(db: Path | str, space: str) -> list[str]:
    """Return the ids of the space's sessions."""
    from afi.providers.memory.ledger.ledger import create_ledger

    return list(create_ledger(db, space=space).sessions())
