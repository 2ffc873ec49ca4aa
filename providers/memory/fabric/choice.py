"""Which embedder a store is opened with: the one it records, or the default for a new store.

A store records the embedder its vectors came from (``meta``: ``embedder``, ``dims``). Opened without
a choice, it is opened with that one, so an upgrade that changes the default never locks anyone out of
their memory; a new store gets :data:`DEFAULT_EMBEDDER`. A choice (``AFI_EMBEDDER``, ``--embedder``)
that differs from what a store records is refused, naming both and the command that moves the store
over (``afi db reembed``): vectors of two models never meet in one search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .embedders import Embedder, HashEmbedder
from .errors import MemoryValidationError

if TYPE_CHECKING:
    from afi.storage.database import Database

__all__ = ["DEFAULT_EMBEDDER", "EMBEDDER_CHOICES", "EmbedderChoice", "embedder_from_name", "recorded_embedder"]

DEFAULT_EMBEDDER = "minilm"
EMBEDDER_CHOICES = ("minilm", "hash")
_HASH_PREFIX = "hash-fnv1a-"


def embedder_from_name(name: str) -> Embedder:
    """Given a choice (``minilm``: all-MiniLM-L6-v2 on ONNX, int8; ``hash``: the token hash), return it.

    Raises:
        MemoryValidationError: an unknown name.
    """
    if name == "hash":
        return HashEmbedder()
    if name == "minilm":
        from .onnx_minilm import OnnxMiniLM  # the model itself loads at the first text embedded

        return OnnxMiniLM()
    raise MemoryValidationError(f"unknown embedder {name!r}: choose {' or '.join(map(repr, EMBEDDER_CHOICES))}")


def _from_record(name: str, dims: int) -> Embedder:
    """The embedder that made vectors recorded as ``name`` with ``dims``."""
    if name.startswith(_HASH_PREFIX) and name == f"{_HASH_PREFIX}{dims}":
        return HashEmbedder(dims)
    made = embedder_from_name("minilm")
    if made.name == name and made.dims == dims:
        return made
    raise MemoryValidationError(
        f"this store's vectors come from embedder {name!r} ({dims} dims), which this afi does not have; move "
        f"the store to one it has: afi db reembed --embedder {DEFAULT_EMBEDDER}"
    )


def recorded_embedder(database: Database) -> tuple[str, int] | None:
    """The embedder ``database`` records (name, dims), or None for a store that has none yet."""
    with database.read() as conn:
        rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dims')").fetchall())
    name, dims = rows.get("embedder"), rows.get("dims")
    if name is None or dims is None or not str(dims).isdigit():
        return None
    return str(name), int(dims)


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
            return embedder_from_name(self.named)
        if recorded is None:
            return embedder_from_name(self.default)
        return _from_record(*recorded)
