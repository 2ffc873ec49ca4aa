"""``create_memory_fabric``: typed notes over a Memory (docs/memory-fabric.md).

``fact``/``procedure``/``file`` notes are rows of the store; ``working`` notes are labeled blocks
of the working value; ``episode`` notes are views over an observational source and write nothing.
A remember is one candidate batch plus one write, in one transaction.
"""

from __future__ import annotations

import hashlib
import inspect
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .attach import Attachment, check_session
from .backlog import LATER
from .batch import Pending, remember_many
from .clock import chain_head, retire_at
from .consolidate import FoldCandidate, Plan, fold_candidates, merge_links, merge_notes, plan_fold
from .context import ContextProvider
from .embedders import embedding_text
from .errors import MemoryConflictError, MemoryValidationError
from .fields import ID_DIGITS, MAX_LINKS, check_hex, check_stored_note, validate_fields
from .memory import Memory, normalize_consent
from .observed import episode_from, promoted_reflection
from .reads import VALID_NOW, NoteReads
from .recall import RECALL_OVERSAMPLE, estimate_tokens, recall
from .store import iso_now
from .types import NOTE_KINDS, WON_OVER, ForgetResult, MemoryNote, PromotedFrom, RecallResult, won_over
from .workers import FabricSettings, evolve_neighbors, link_neighbors, resolve_settings
from .working import append_block, check_label, read_blocks, set_block, tombstone_block

if TYPE_CHECKING:
    from ..ledger.conversation import ConversationResult

__all__ = ["MemoryFabric", "create_memory_fabric"]


class MemoryFabric(NoteReads):
    """Typed notes over one Memory: remember, recall, forget, blocks, attach, context (the reads of
    stored notes in :class:`.reads.NoteReads`)."""

    def __init__(self, memory: Memory, settings: FabricSettings, observational: Any = None) -> None:
        self.memory = memory
        self.settings = settings
        self.observational = observational
        self._gate: dict[str, Any] = {}
        self._gate_lock = threading.Lock()
        # False: a batch searches each note's fold on its own, one after the other (bench.fold's baseline)
        self.fold_together = True

    # -- remember ------------------------------------------------------------------------

    def remember(self, *, kind: str, content: str | None = None, id: str | None = None, name: str | None = None,
                 block: str | None = None, path: str | None = None, t_ref: Any = None, valid_from: Any = None,
                 valid_to: Any = None, keywords: Any = None, tags: Any = None, source_entry_ids: Any = None,
                 context: Any = None, links: Any = None, supersedes: Any = None, importance: Any = None,
                 consent: Any = None, reflection_id: Any = None, consolidate: bool | None = None,
                 **unknown: Any) -> MemoryNote:  # fmt: skip
        """Write one note and return it (for a folded write, the surviving row).

        Raises MemoryValidationError for an unknown kind or field or a malformed value,
        MemoryLimitError for content over ``max_entry_text_chars``, MemoryConflictError when an
        explicit id's name is held by another current note, MemoryNotFoundError for an unknown episode.
        """
        given = {
            "content": content, "id": id, "name": name, "block": block, "path": path, "t_ref": t_ref,
            "valid_from": valid_from, "valid_to": valid_to, "keywords": keywords, "tags": tags,
            "source_entry_ids": source_entry_ids, "context": context, "links": links, "supersedes": supersedes,
            "importance": importance, "consent": consent, "reflection_id": reflection_id, **unknown,
        }  # fmt: skip
        fields, now = self._checked(kind, consolidate, given)
        if kind == "episode":
            return episode_from(self.memory, self.observational, fields)
        if kind == "working":
            return set_block(self.memory, fields["block"], self.memory.redact(fields["content"]),
                             importance=fields.get("importance"))  # fmt: skip
        pending = self._pending(kind, fields, now, consolidate)
        trailing = self.memory.trailing
        # the row written (a merge keeps this content) holds the vector of this text, made now or after
        embedding = LATER if trailing else self.memory.embedder.embed([embedding_text(pending.note)])[0]
        with self.memory.store.write(self.memory.scope):
            note = self._stored(pending, embedding)
        if trailing:
            trailing.wrote([note.id])
        return note

    def remember_many(self, notes: Any) -> list[MemoryNote]:
        """Write a batch of notes in one transaction and return them in order (see :mod:`.batch`): each
        item is a mapping of :meth:`remember`'s fields, of kind fact, procedure or file.

        Raises MemoryLimitError past ``MAX_BATCH_NOTES`` or ``MAX_BATCH_BYTES``, and whatever
        :meth:`remember` raises, its message naming the item (``notes[3]: ...``); nothing is written then.
        """
        return remember_many(self, notes)

    def _checked(self, kind: Any, consolidate: Any, given: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """Given a remember's kind, consolidate flag and other fields, return the fields checked and
        canonical, and the instant they were checked at."""
        unknown = sorted(set(given) - REMEMBER_FIELDS)
        if unknown:
            raise MemoryValidationError(f"unknown remember field(s): {', '.join(unknown)}")
        if kind not in NOTE_KINDS:
            raise MemoryValidationError(f"unknown memory note kind: {kind!r} (known: {', '.join(NOTE_KINDS)})")
        if consolidate is not None and not isinstance(consolidate, bool):
            raise MemoryValidationError("consolidate must be a boolean")
        now = iso_now()
        named = {key: value for key, value in given.items() if key != "consent"}
        fields = validate_fields(self.memory, kind, now, **named)
        fields["consent"] = normalize_consent(given.get("consent"), now=now)
        return fields, now

    def _pending(self, kind: str, f: dict[str, Any], now: str, consolidate: bool | None) -> Pending:
        """Given a stored kind's checked fields, return the note to write (redacted), not yet embedded."""
        memory = self.memory
        promoted: PromotedFrom | None = None
        if f.get("reflection_id") is not None:
            f["content"], promoted = promoted_reflection(self.observational, f["reflection_id"])
            f["content"] = validate_fields(memory, kind, now, content=f["content"])["content"]
        content = memory.redact(f["content"])
        explicit_id = f.get("id") is not None
        explicit = explicit_id or f.get("supersedes") is not None
        folding = (self.settings.consolidate if consolidate is None else consolidate) and not explicit
        incoming = MemoryNote(
            id=f.get("id") or _derive_id(kind, content, now),
            kind=kind,
            content=content, name=f.get("name"), ingested_at=now, created_at=now,
            token_count=estimate_tokens(content),
            t_ref=f.get("t_ref"), valid_from=f.get("valid_from"), valid_to=f.get("valid_to"),
            supersedes=f.get("supersedes"), links=f.get("links") or [],
            tags=[memory.redact(t) for t in f.get("tags") or []],
            keywords=[memory.redact(k) for k in f.get("keywords") or []],
            context=memory.redact(f["context"]) if f.get("context") else None,
            importance=f.get("importance"), source_entry_ids=f.get("source_entry_ids") or [],
            path=f.get("path"), promoted_from=promoted, consent=f.get("consent"), scope=memory.scope,
        )  # fmt: skip
        return Pending(incoming, now, explicit_id, folding)

    def _stored(self, pending: Pending, embedding: Any) -> MemoryNote:
        """Fold and write one pending note; call inside ``store.write(scope)`` (a remember's own
        transaction, or a batch's)."""
        memory = self.memory
        incoming, now, explicit_id, folding = pending.note, pending.now, pending.explicit_id, pending.folding
        kind, name, content = incoming.kind, incoming.name, incoming.content
        attached = bool(self._gate)
        workers = not self.settings.passive and attached
        link_k = self.settings.linker.limit if workers and self.settings.linker.enabled else 0
        patch_k = self.settings.evolution.limit if workers and self.settings.evolution.enabled else 0
        held = memory.present()  # fold into what is current now, not when asked
        if held > now:
            now = held
            incoming = incoming.model_copy(update={"ingested_at": now, "created_at": now})
        candidates: list[FoldCandidate] = []
        unnamed_fold = folding and name is None and kind != "file"
        if unnamed_fold or link_k or patch_k:
            limit = min(32, RECALL_OVERSAMPLE * max(1, link_k, patch_k))
            candidates = fold_candidates(memory, kind, content, embedding, now, limit,
                                         threshold=self.settings.threshold,
                                         neighbours=bool(link_k or patch_k))  # fmt: skip
        plan = self._plan(kind, incoming, explicit_id, candidates, folding, unnamed_fold, now)
        note = self._write(plan, incoming, explicit_id, embedding, now)
        exclude = {note.id, *([note.supersedes] if note.supersedes else [])}
        if link_k:
            derived = link_neighbors(candidates, link_k, exclude)
            merged = merge_links(derived, incoming.links, note.links) if derived else []
            if derived and len(merged) <= MAX_LINKS:  # derived links never push a note past the cap
                note = note.model_copy(update={"links": merged})
                memory.store.update_note(memory.scope, note)
        if patch_k:
            evolve_neighbors(memory, candidates, keywords=incoming.keywords, context=incoming.context,
                             max_patches=patch_k, max_bytes=self.settings.max_result_bytes,
                             exclude=exclude, now=now)  # fmt: skip
        return note

    def _plan(self, kind: str, incoming: MemoryNote, explicit_id: bool, candidates: list[FoldCandidate],
              folding: bool, unnamed_fold: bool, now: str) -> Plan:  # fmt: skip
        name, store, scope = incoming.name, self.memory.store, self.memory.scope
        holder = self.find(kind, name, as_of=now) if name is not None else None
        if explicit_id or incoming.supersedes is not None:
            target = self._current_row(incoming.supersedes, now) if incoming.supersedes is not None else None
            if holder is not None and holder.id not in (incoming.id, incoming.supersedes):
                raise MemoryConflictError(f"the {kind} name {name!r} is held by note {holder.id}")
            return Plan("supersede", target) if target is not None else Plan("insert")
        # a version that won a sync's conflict is answered by a new version, whatever its text: the
        # conflict closes with it (an in-place rewrite would not: a peer's state brings the links back)
        if kind == "file" and folding:
            current = self.find_file(incoming.path or "", as_of=now)
            if current is not None:
                head = chain_head(store, scope, current)
                return Plan("supersede" if won_over(head) else "update", head)
        if holder is not None:
            holder = chain_head(store, scope, holder)
            if not folding or won_over(holder):
                return Plan("supersede", holder)
            return plan_fold(incoming.content, FoldCandidate(holder, 1.0), 0.0)
        if unnamed_fold:
            nearest = candidates[0] if candidates else None
            if nearest is not None:
                nearest = FoldCandidate(chain_head(store, scope, nearest.note), nearest.cosine)
            return plan_fold(incoming.content, nearest, self.settings.threshold)
        return Plan("insert")

    def _write(self, plan: Plan, incoming: MemoryNote, explicit_id: bool, embedding: Any, now: str) -> MemoryNote:
        store, scope = self.memory.store, self.memory.scope
        if explicit_id:
            rows = store.select_notes(scope, "id = ?", (incoming.id,))
            if rows and (rows[0].kind != incoming.kind or rows[0].status != "active"):
                raise MemoryConflictError(
                    f"id {incoming.id} is already taken by a {rows[0].status} {rows[0].kind} note"
                )
            if rows:
                # an explicit id names its row: overwrite it, keeping when it was created
                note = incoming.model_copy(
                    update={"created_at": rows[0].created_at, "updated_at": now, "name": incoming.name or rows[0].name}
                )
                store.update_note(scope, note, embedding)
                return note
        if plan.action == "update" and plan.target is not None:
            note = merge_notes(plan.target, incoming, now=now)
            check_stored_note(note, self.memory.limits)  # the union of two notes' lists keeps their caps
            store.update_note(scope, note, embedding)
            return note
        if plan.action == "supersede" and plan.target is not None:
            old = plan.target
            cut = retire_at(now, old.valid_from)
            starts = incoming.valid_from or cut
            if incoming.valid_to is not None and incoming.valid_to <= starts:
                raise MemoryValidationError(f"valid_to {incoming.valid_to} is not after {starts}, when this version of "
                                            f"{old.id} would start")  # fmt: skip
            store.update_note(scope, old.model_copy(update={"valid_to": cut, "updated_at": now}))
            # the old version's won_over links came back with its front matter (a read, edited, written):
            # they stay with the version that won, so the conflict closes with this one
            settled = set(won_over(old))
            links = [link for link in incoming.links if not (link.relation == WON_OVER and link.id in settled)]
            incoming = incoming.model_copy(update={"supersedes": old.id, "name": incoming.name or old.name,
                                                   "valid_from": starts, "links": links})  # fmt: skip
        if incoming.name is None:
            incoming = incoming.model_copy(update={"name": incoming.id})
        store.insert_note(scope, incoming, embedding)
        return incoming

    def _current_row(self, note_id: str, now: str) -> MemoryNote | None:
        rows = self.memory.store.select_notes(
            self.memory.scope, f"id = ? AND status = 'active' AND {VALID_NOW}", (note_id, now, now)
        )
        return rows[0] if rows else None

    # -- reads -----------------------------------------------------------------------------

    def search_conversation(
        self,
        query: str,
        *,
        limit: int = 20,
        direction: str = "backward",
        detail: str = "summary",
        top_k: int = 5,
        signal: Any = None,
    ) -> ConversationResult:
        """Given a query, return ``{hits, scanned}``: branch messages by query-term coverage, each with
        the page around it (see :func:`.conversation.search_conversation`).

        Raises MemoryValidationError without an observational source or for bad options.
        """
        from ..ledger.conversation import search_conversation

        return search_conversation(self.observational, query, limit=limit, direction=direction, detail=detail,
                                   top_k=top_k, signal=signal)  # fmt: skip

    def recall(self, query: str, *, kinds: Any = None, as_of: Any = None, top_k: Any = None, budget: Any = None,
               scoring: Any = None) -> RecallResult:  # fmt: skip
        """Given a query, return ``{hits, explain}`` (docs/memory-fabric.md, "Recall and scoring"); the query
        is never echoed."""
        return recall(self.memory, query, kinds=kinds, as_of=as_of, top_k=top_k, budget=budget, scoring=scoring)

    def blocks(self) -> dict[str, MemoryNote]:
        """Return the working blocks by label (forgotten ones left out)."""
        return read_blocks(self.memory)

    def append_block(self, block: str, text: str, *, expected_version: int | None = None) -> MemoryNote:
        """Append text to a working block (versioned, capped); return the block's note."""
        return append_block(self.memory, block, text, expected_version=expected_version)

    def fill_vectors(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Make now the vectors still missing from this scope's notes (a sentence embedder's store makes
        them after the write: :mod:`.trailing`); return how many this call stored. ``progress(done,
        total)`` is called after each batch, counting the vectors made by this process's thread too."""
        trailing = self.memory.trailing
        return trailing.fill_counted(progress) if trailing is not None else 0

    def change_seq(self) -> int:
        """Return the latest note change seq of this scope (another process's writes included)."""
        return self.memory.store.change_seq(self.memory.scope)

    # -- forget ------------------------------------------------------------------------------

    def forget(self, *, id: str | None = None, block: str | None = None, hold: bool = False) -> ForgetResult:
        """Tombstone one note (deleted, or kept as legal_hold with ``hold``) or clear one block."""
        if (id is None) == (block is None):
            raise MemoryValidationError("forget requires exactly one of id or block")
        if not isinstance(hold, bool):
            raise MemoryValidationError("hold must be a boolean")
        if block is not None:
            if hold:
                raise MemoryValidationError("hold applies to notes; a block is cleared in place")
            label = check_label(block)
            return ForgetResult(block=label, deleted=int(tombstone_block(self.memory, label)), held=False)
        note_id = check_hex(id, "id")
        store, scope = self.memory.store, self.memory.scope
        with store.write(scope):
            rows = store.select_notes(scope, "id = ?", (note_id,))
            if not rows:
                return ForgetResult(id=note_id, deleted=0, held=False)
            if hold:
                now = self.memory.present()
                store.update_note(scope, rows[0].model_copy(update={"status": "legal_hold", "forgotten_at": now,
                                                                    "updated_at": now}))  # fmt: skip
                return ForgetResult(id=note_id, deleted=0, held=True)
            return ForgetResult(id=note_id, deleted=store.delete_note(scope, note_id), held=False)

    # -- attach and context ----------------------------------------------------------------------

    def attach(self, session: Any) -> Attachment:
        """Authorise a session: the workers run and the tools answer only while one is attached.

        Raises MemoryScopeError for anything that is not a session, or not the observational one.
        """
        check_session(session, self.observational)
        with self._gate_lock:
            self._gate["session"] = session
        return Attachment(session, self.create_context_provider(), self.settings, self._gate, self._gate_lock)

    @property
    def attached(self) -> bool:
        return "session" in self._gate

    @property
    def attached_session(self) -> Any:
        return self._gate.get("session")

    def create_context_provider(self, *, include_working: bool = True, include_semantic: bool = True,
                                query: str | None = None, top_k: int | None = None,
                                name: str = "memory-fabric") -> ContextProvider:  # fmt: skip
        """Return a provider whose ``blocks()`` are tagged working-memory and semantic-memory."""
        return ContextProvider(
            self.memory, self.recall, lambda: self.notes(kinds=["fact", "file"]), self.blocks,
            include_working, include_semantic, query, top_k, name,
        )  # fmt: skip


def _derive_id(kind: str, content: str, now: str) -> str:
    return hashlib.sha256(f"fabric\x00{kind}\x00{content}\x00{now}\x00{uuid.uuid4()}".encode()).hexdigest()[:ID_DIGITS]


def create_memory_fabric(
    memory: Memory,
    *,
    observational: Any = None,
    consolidate: bool | dict[str, Any] = True,
    linker: bool | dict[str, Any] | None = None,
    evolution: bool | dict[str, Any] | None = None,
    passive: bool = False,
    worker_limits: dict[str, Any] | None = None,
) -> MemoryFabric:
    """Return a fabric over ``memory``; it starts nothing (no workers, timers or tools) until asked.

    Raises MemoryValidationError for bad options or an observational source it cannot read.
    """
    if not isinstance(memory, Memory):
        raise MemoryValidationError("create_memory_fabric requires a Memory from create_memory()")
    if observational is not None and not _observational(observational):
        raise MemoryValidationError("observational must expose session.entries(), or observation() and reflection()")
    settings = resolve_settings(consolidate, linker, evolution, passive, worker_limits)
    return MemoryFabric(memory, settings, observational)


def _observational(source: Any) -> bool:
    """A source the fabric can read: the seed's one session (``session.entries()``), or lookups by id
    (a ledger of many sessions, :class:`~..ledger.source.LedgerSource`)."""
    if callable(getattr(getattr(source, "session", None), "entries", None)):
        return True
    return callable(getattr(source, "observation", None)) and callable(getattr(source, "reflection", None))


# what a remember takes besides ``kind`` and ``consolidate``: its keyword parameters, read once
REMEMBER_FIELDS = frozenset(inspect.signature(MemoryFabric.remember).parameters) - {
    "self",
    "kind",
    "consolidate",
    "unknown",
}
