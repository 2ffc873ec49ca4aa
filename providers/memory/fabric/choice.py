"""Which embedder a store is opened with: the one it records, or the default for a new store.

A store records the embedder its vectors came from (``meta``: ``embedder``, ``dims``). Opened without
a choice, it is opened with that one, so an upgrade that changes the default never locks anyone out of
their memory; a new store gets the default (``minilm`` from the ``afi`` command, ``hash`` from the
library). A choice (``AFI_EMBEDDER``, ``--embedder``) that differs from what a store records is refused
by the store, naming both and the command that moves the store over (``afi db reembed``): vectors of
two models never meet in one search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .embedders import EMBEDDERS, Embedder, HashEmbedder, embedder_from_name
from .errors import MemoryValidationError

if TYPE_CHECKING:
    from afi.storage.database import Database

__all__ = ["DEFAULT_EMBEDDER", "EmbedderChoice", "embedder_named", "recorded_embedder", "recorded_in", "short_name"]

DEFAULT_EMBEDDER = "minilm"
_HASH_PREFIX = "hash-fnv1a-"


def embedder_named(name: str) -> Embedder:
    """Given a name as a person gives it (``minilm``, ``hash``) or as a store records it
    (``minilm-l6-v2-int8``, ``hash-fnv1a-384``), return that embedder.

    Raises:
        MemoryValidationError: a name no embedder here answers to.
    """
    if name in EMBEDDERS:
        return embedder_from_name(name)
    dims = name.removeprefix(_HASH_PREFIX)
    if name.startswith(_HASH_PREFIX) and dims.isdigit() and str(int(dims)) == dims:
        return HashEmbedder(int(dims))
    for short in EMBEDDERS:
        made = embedder_from_name(short)
        if made.name == name:
            return made
    raise MemoryValidationError(
        f"unknown embedder {name!r}: use {' or '.join(map(repr, EMBEDDERS))} (or the name a store records, "
        f"such as {HashEmbedder().name!r})"
    )


def short_name(name: str) -> str:
    """The name a person gives for the embedder a store records as ``name`` (``minilm-l6-v2-int8`` is
    ``minilm``, ``hash-fnv1a-384`` is ``hash``), or ``name`` itself when no shorter one means it."""
    if name == HashEmbedder().name:
        return "hash"
    for short in EMBEDDERS:
        if short != "hash" and embedder_from_name(short).name == name:
            return short
    return name


def _from_record(name: str, dims: int) -> Embedder:
    """The embedder that made vectors recorded as ``name`` with ``dims``."""
    try:
        made = embedder_named(name)
    except MemoryValidationError:
        made = None
    if made is None or made.dims != dims:
        raise MemoryValidationError(
            f"this store's vectors come from embedder {name!r} ({dims} dims), which this afi does not have: "
            f"move the store to one it has with afi db reembed --embedder {DEFAULT_EMBEDDER}"
        )
    return made


def recorded_in(conn: Any) -> tuple[str | None, int | None]:
    """The embedder ``meta`` names on this connection, and its dims (None, None: nothing recorded yet)."""
    rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dims')").fetchall())
    dims = rows.get("dims")
    return rows.get("embedder"), int(dims) if dims is not None and str(dims).isdigit() else None


def recorded_embedder(database: Database) -> tuple[str, int] | None:
    """The embedder ``database`` records (name, dims), or None for a store that has none yet."""
    with database.read() as conn:
        name, dims = recorded_in(conn)
    return (str(name), dims) if name is not None and dims is not None else None


@dataclass(frozen=True)
class EmbedderChoice:
    """What a store is opened with: ``named`` when the user named one (``AFI_EMBEDDER``, ``--embedder``),
    else the embedder the store records, else ``default`` (a new store). The library's default is the
    dependency-free hash embedder; the ``afi`` command's is :data:`DEFAULT_EMBEDDER`."""

    named: str | None = None
    default: str = "hash"

    def resolve(self, database: Database | None) -> Embedder:
        """The embedder to open ``database`` with (None: a store that is new for certain). A named one
        that another embedder's vectors fill the store with is returned too: the store refuses it when
        it opens, naming both.

        Raises:
            MemoryValidationError: an unknown name, or a recorded embedder this afi does not have.
        """
        return self.for_record(recorded_embedder(database) if database is not None else None)

    def for_record(self, recorded: tuple[str, int] | None) -> Embedder:
        """The embedder to open a store with that records ``recorded`` (name, dims; None: nothing yet).

        Raises:
            MemoryValidationError: as :meth:`resolve`.
        """
        if self.named is not None:
            return embedder_named(self.named)
        if recorded is None:
            return embedder_named(self.default)
        return _from_record(*recorded)
