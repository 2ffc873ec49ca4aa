"""``create_memory``: one scope over the SQLite store, with its embedder, limits, consent and lineage.

The fabric writes and reads only through a Memory: the scope it names, the redactor it applies
before anything is embedded or stored, the consent rule recall enforces, and the lineage plane
that ``revoke_source`` feeds.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from afi.storage.database import open_database

from .choice import EmbedderChoice
from .clock import scope_now
from .embedders import Embedder, bags_of_words
from .errors import MemoryLimitError, MemoryValidationError
from .store import Store
from .types import Scope

if TYPE_CHECKING:
    from .pg_vectors import PgVectorIndex
    from .trailing import TrailingVectors
    from .vectors import VectorIndex

__all__ = [
    "HARD_TOP_K_CAP",
    "HASH_FUSION",
    "FusionSettings",
    "Memory",
    "MemoryLimits",
    "consent_visible",
    "create_memory",
    "normalize_consent",
    "space_memory",
]

HARD_TOP_K_CAP = 32
HARD_MAX_ENTRY_TEXT_CHARS = 64_384
HARD_MAX_FILE_BYTES = 1024 * 1024
_REVOKE_REASONS = ("corrected", "revoked", "forgotten", "legal_hold")
_CONSENT_SOURCES = ("user", "agent", "system")
_CONSENT_SCOPES = ("thread", "profile", "user")


@dataclass(frozen=True)
class MemoryLimits:
    """Caps of one memory: recall ``top_k`` (hard cap 32), note text length, file size for the tools."""

    top_k: int = 5
    max_entry_text_chars: int = 4000
    max_file_bytes: int = 50 * 1024

    def __post_init__(self) -> None:
        for name, cap in (
            ("top_k", HARD_TOP_K_CAP),
            ("max_entry_text_chars", HARD_MAX_ENTRY_TEXT_CHARS),
            ("max_file_bytes", HARD_MAX_FILE_BYTES),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise MemoryLimitError(f"limits.{name} must be a positive integer")
            if value > cap:
                raise MemoryLimitError(f"limits.{name} {value} exceeds the hard cap {cap}")

    @classmethod
    def resolve(cls, value: MemoryLimits | dict[str, Any] | None) -> MemoryLimits:
        """Given limits, a dict of them, or None, return MemoryLimits (unknown keys refused)."""
        if value is None:
            return cls()
        if isinstance(value, MemoryLimits):
            return value
        if not isinstance(value, dict):
            raise MemoryValidationError("limits must be a MemoryLimits or a dict")
        unknown = sorted(set(value) - {"top_k", "max_entry_text_chars", "max_file_bytes"})
        if unknown:
            raise MemoryValidationError(f"unknown limits: {', '.join(unknown)}")
        return cls(**value)


@dataclass(frozen=True)
class FusionSettings:
    """How recall fuses the vector and BM25 rankings.

    ``mode``: ``rrf`` (weighted reciprocal-rank fusion), ``vector`` (cosine only) or ``lexical``
    (BM25 only). ``window``: how deep each ranking is read before fusing. ``max_postings``: the BM25
    side keeps the query's rarest terms while their summed document counts stay under it (common
    terms rank little and cost most; the vector side still sees them). ``adjacent_weight``: how much of
    their relevance the notes written next to a note about the same moment lend it, up to
    ``adjacent_span`` rows each side (:mod:`.adjacency`; 0 turns it off). ``date_weight``: when the query names
    a time, how far the notes about it rise toward 1 and the others fall toward 0 (:mod:`.signals`,
    :mod:`.dates`; 0 turns it off).
    """

    mode: Literal["rrf", "vector", "lexical"] = "rrf"
    k: float = 60.0
    vector_weight: float = 1.0
    lexical_weight: float = 1.0
    window: int = 100
    max_postings: int = 5000
    # fit on LoCoMo's development split with the sentence embedder (docs/decisions/0018): recall@5/@10
    # 59.9/71.0 without either signal, 65.1/75.4 with both
    adjacent_weight: float = 0.5
    adjacent_span: int = 2
    date_weight: float = 0.3

    def __post_init__(self) -> None:
        if self.mode not in ("rrf", "vector", "lexical"):
            raise MemoryValidationError("fusion.mode must be 'rrf', 'vector' or 'lexical'")
        if not self.k > 0 or self.vector_weight < 0 or self.lexical_weight < 0:
            raise MemoryValidationError("fusion.k must be > 0 and the weights >= 0")
        if self.vector_weight + self.lexical_weight <= 0:
            raise MemoryValidationError("fusion needs a positive vector_weight or lexical_weight")
        if not isinstance(self.window, int) or not 1 <= self.window <= 1000:
            raise MemoryValidationError("fusion.window must be an integer in 1..1000")
        for label in ("adjacent_weight", "date_weight"):
            weight = getattr(self, label)
            if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1:
                raise MemoryValidationError(f"fusion.{label} must be a number in [0,1]")
        span = self.adjacent_span
        if isinstance(span, bool) or not isinstance(span, int) or not 1 <= span <= 8:
            raise MemoryValidationError("fusion.adjacent_span must be an integer in 1..8")

    @classmethod
    def resolve(
        cls, value: FusionSettings | dict[str, Any] | None, base: FusionSettings | None = None
    ) -> FusionSettings:
        """Given settings, a dict overriding ``base``, or None, return FusionSettings."""
        base = base or cls()
        if value is None:
            return base
        if isinstance(value, FusionSettings):
            return value
        if not isinstance(value, dict):
            raise MemoryValidationError("fusion must be a dict of FusionSettings fields (mode, k, vector_weight, ...)")
        unknown = sorted(set(value) - set(cls.__dataclass_fields__))
        if unknown:
            raise MemoryValidationError(f"unknown fusion settings: {', '.join(unknown)}")
        merged = {**base.__dict__, **value}
        return cls(**merged)


HASH_FUSION = FusionSettings(k=10.0, vector_weight=1.0, lexical_weight=6.0)


def normalize_consent(value: Any, *, now: str) -> dict[str, Any] | None:
    """Given a consent input ``{source?, scope?, visible?}`` (or None), return the stored consent.

    Raises MemoryValidationError for anything else.
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MemoryValidationError("consent must be a mapping of source, scope, visible")
    unknown = sorted(set(value) - {"source", "scope", "visible", "granted_at", "revoked_at"})
    if unknown:
        raise MemoryValidationError(
            f"unknown consent field(s): {', '.join(unknown)} (accepted: source, scope, visible)"
        )
    source = value.get("source", "agent")
    scope = value.get("scope", "thread")
    visible = value.get("visible", True)
    if source not in _CONSENT_SOURCES:
        raise MemoryValidationError(f"consent.source must be one of {', '.join(_CONSENT_SOURCES)}")
    if scope not in _CONSENT_SCOPES:
        raise MemoryValidationError(f"consent.scope must be one of {', '.join(_CONSENT_SCOPES)}")
    if not isinstance(visible, bool):
        raise MemoryValidationError("consent.visible must be a boolean")
    out: dict[str, Any] = {"source": source, "scope": scope, "visible": visible}
    out["granted_at"] = value.get("granted_at") or now
    if value.get("revoked_at"):
        out["revoked_at"] = value["revoked_at"]
    return out


def consent_visible(consent: dict[str, Any] | None, require_consent: bool) -> bool:
    """Return whether a note with this consent may be recalled or injected."""
    if consent is None:
        return not require_consent
    return consent.get("visible") is not False and not consent.get("revoked_at")


@dataclass(eq=False)
class Memory:
    """One scope of memory over a Store: what every fabric call writes and reads through."""

    scope: Scope
    embedder: Embedder
    limits: MemoryLimits
    store: Store
    redactor: Callable[[str], str] | None = None
    require_consent: bool = False
    fusion: FusionSettings = field(default_factory=FusionSettings)
    owns_store: bool = True
    vectors_after_write: bool = True

    def __post_init__(self) -> None:
        self._index: VectorIndex | PgVectorIndex | None = None
        self._index_lock = threading.Lock()
        self._trailing: TrailingVectors | None = None

    @property
    def index(self) -> VectorIndex | PgVectorIndex:
        """The scope's vector index (recall and folding read it), made at its first use: listing and
        reading notes need no vectors, and so do not load numpy."""
        if self._index is None:
            with self._index_lock:  # one index a scope, whichever threads ask first
                if self._index is None:
                    from .pg_vectors import PgVectorIndex
                    from .vectors import VectorIndex

                    sqlite: type[VectorIndex | PgVectorIndex] = VectorIndex
                    index = self.store.database.engine.choose(sqlite=sqlite, postgresql=PgVectorIndex)
                    self._index = index(self.store, self.scope, self.embedder.dims)
        return self._index

    @property
    def trailing(self) -> TrailingVectors | None:
        """What makes this store's note vectors after the writes (:mod:`.trailing`), or None when a
        write makes its own: the hash embedder (its vectors cost microseconds, and the fold reads
        them), a store in memory (one connection, gone with the process), or a memory opened with
        ``vectors_after_write=False``."""
        if bags_of_words(self.embedder) or self.store.in_memory or not self.vectors_after_write:
            return None
        if self._trailing is None:
            with self._index_lock:
                if self._trailing is None:
                    from .trailing import TrailingVectors

                    self._trailing = TrailingVectors(self.store, self.embedder, self.scope)
        return self._trailing

    def present(self) -> str:
        """The scope's "now": the wall clock, or its last writes' stamps when a clock ahead wrote them
        (:mod:`.clock`); what a read without ``as_of`` is taken at and a write is stamped with."""
        return scope_now(self.store.database, self.scope)

    def redact(self, text: str) -> str:
        """Given text, return it through the redactor (unchanged without one)."""
        return self.redactor(text) if self.redactor is not None else text

    def revoke_source(self, entry_id: str, reason: Literal["corrected", "revoked", "forgotten", "legal_hold"]) -> None:
        """Mark a session entry as corrected/revoked/forgotten/legal_hold: every note whose
        ``source_entry_ids`` include it is excluded from recall and context from now on."""
        if not isinstance(entry_id, str) or not entry_id:
            raise MemoryValidationError("entry_id must be a non-empty string")
        if reason not in _REVOKE_REASONS:
            raise MemoryValidationError(f"reason must be one of {', '.join(_REVOKE_REASONS)}")
        self.store.revoke_source(self.scope, entry_id, reason)

    def revoked_sources(self) -> dict[str, str]:
        """Return ``{entry_id: reason}`` of this scope's revoked source entries."""
        return self.store.revoked_sources(self.scope)

    def close(self) -> None:
        """Make the vectors this memory's writes left to make, then close the store connections (when
        this memory opened the store)."""
        if self._trailing is not None:
            self._trailing.close()
        if self.owns_store:
            self.store.close()


def _require_id(value: Any, label: str) -> str:
    if not isinstance(value, str) or not value or "\x00" in value:
        raise MemoryValidationError(f"{label} must be a non-empty string")
    return value


def create_memory(
    db: str | os.PathLike[str] = ":memory:",
    *,
    tenant_id: str,
    resource_id: str,
    thread_id: str,
    embedder: Embedder | EmbedderChoice | None = None,
    redactor: Callable[[str], str] | None = None,
    require_consent: bool = False,
    limits: MemoryLimits | dict[str, Any] | None = None,
    fusion: FusionSettings | dict[str, Any] | None = None,
    vectors_after_write: bool = True,
) -> Memory:
    """Open (or create) the store at ``db`` and return the Memory of one tenant/resource/thread scope.

    Without an ``embedder`` the store is opened with the one it records (a new store: the hash embedder);
    an :class:`EmbedderChoice` says which the user asked for, or which a new store gets. A sentence
    embedder's vectors are made after the write (:mod:`.trailing`); ``vectors_after_write=False``
    has every write embed its note first, as the hash embedder's do.

    Raises MemoryValidationError for an empty scope part, a non-embedder, or a store built with
    another embedder; MemoryLimitError for limits over their hard caps.
    """
    scope = Scope(
        tenant_id=_require_id(tenant_id, "tenant_id"),
        resource_id=_require_id(resource_id, "resource_id"),
        thread_id=_require_id(thread_id, "thread_id"),
    )
    if embedder is None or isinstance(embedder, EmbedderChoice):
        embedder = _store_embedder(db, embedder or EmbedderChoice())
    if not isinstance(embedder, Embedder) or not isinstance(embedder.dims, int) or not embedder.name:
        raise MemoryValidationError("embedder must have a name, integer dims and an embed(texts) method")
    if redactor is not None and not callable(redactor):
        raise MemoryValidationError("redactor must be callable")
    if not isinstance(require_consent, bool):
        raise MemoryValidationError("require_consent must be a boolean")
    if not isinstance(vectors_after_write, bool):
        raise MemoryValidationError("vectors_after_write must be a boolean")
    resolved_limits = MemoryLimits.resolve(limits)
    # the hash embedder ranks poorly on its own (LoCoMo dev recall@10: 23.3 vector vs 64.0 BM25), so by
    # default its vote counts less; a real sentence embedder gets equal weights (LoCoMo dev recall@10 with
    # MiniLM: 70.9 at k=10 against 65.3 at k=60)
    # chosen by the embedder's name, so a wrapper around the hash embedder (a cache) keeps its tuning
    base = HASH_FUSION if bags_of_words(embedder) else FusionSettings(k=10.0)
    resolved_fusion = FusionSettings.resolve(fusion, base)
    store = Store(db, embedder_name=embedder.name, dims=embedder.dims)
    return Memory(
        scope,
        embedder,
        resolved_limits,
        store,
        redactor,
        require_consent,
        resolved_fusion,
        vectors_after_write=vectors_after_write,
    )


def _store_embedder(db: str | os.PathLike[str], choice: EmbedderChoice) -> Embedder:
    """The embedder ``choice`` gives for the store at ``db`` (an in-memory store is always new)."""
    if os.fspath(db) == ":memory:":
        return choice.resolve(None)
    return choice.resolve(open_database(os.fspath(db)))


def space_memory(
    db: str | os.PathLike[str], space: str, *, embedder: Embedder | EmbedderChoice | None = None, **kw: Any
) -> Memory:
    """Return the Memory an AFI space maps to: tenant ``afi``, resource = space, thread ``main``."""
    return create_memory(db, tenant_id="afi", resource_id=space, thread_id="main", embedder=embedder, **kw)
