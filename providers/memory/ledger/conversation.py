"""Conversation search over a session's branch, and the branch page around a message.

``search_conversation`` scores messages by query-term coverage (the share of the query's terms a
message contains), best first, ties newest first, and returns the branch page around each hit. Over
a :class:`LedgerSource` the candidates come from the ledger's full-text index (:mod:`.index`: FTS5 on
SQLite, a ``tsvector`` on PostgreSQL; only messages holding at least one term are scored, and
``scanned`` counts them); over any other ``{session: {entries()}}``
source the branch is scanned in Python and ``scanned`` is the number of messages. Over the index,
when ``top_k`` messages hold every term only those are scored (``scanned`` counts them). No model is called.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..fabric.errors import MemoryValidationError
from ..fabric.lexical import STOPWORDS
from ..fabric.recall import estimate_tokens
from ..fabric.types import ExplainRow, MemoryNote, RecallHit, Scope
from .index import ConversationAbortedError, best_messages, is_aborted
from .ledger import LedgerSession, Observation

__all__ = [
    "DEFAULT_PAGE_LIMIT",
    "DEFAULT_TOP_K",
    "MAX_PAGE_LIMIT",
    "TRANSCRIPT_HEADER_LINES",
    "BranchPage",
    "ConversationAbortedError",
    "ConversationHit",
    "ConversationResult",
    "LedgerSource",
    "branch_page",
    "conversation_terms",
    "episode_note",
    "episode_recall",
    "render_transcript",
    "search_conversation",
]

DEFAULT_PAGE_LIMIT = 20
MAX_PAGE_LIMIT = 100
DEFAULT_TOP_K = 5
MAX_QUERY_TERMS = 32
TRANSCRIPT_HEADER_LINES = 2
MAX_EPISODE_CANDIDATES = 2000
MESSAGE_ROLES = frozenset({"user", "assistant", "tool"})
_TERM = re.compile(r"[^\W_]+", re.UNICODE)
_PROGRESS_STEPS = 1000  # messages a plain scan scores between two looks at the abort signal


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BranchPage(_Model):
    """The branch page around a cursor message (observational memory's page helper)."""

    found: bool
    cursor: str
    direction: Literal["backward", "forward"]
    limit: int
    entries: list[dict[str, Any]] = Field(default_factory=list)
    next_cursor: str | None = None
    prev_cursor: str | None = None
    text: str
    reason: str | None = None


class ConversationHit(_Model):
    entry_id: str
    score: float
    timestamp: str
    page: BranchPage


class ConversationResult(_Model):
    hits: list[ConversationHit]
    scanned: int


def conversation_terms(query: str) -> list[str]:
    """Given a query, return its distinct lowercase terms of two or more characters, stopwords left
    out (unless nothing else is left), at most 32 of them."""
    if not isinstance(query, str):
        raise MemoryValidationError("the conversation query must be a string")
    terms = list(dict.fromkeys(t for t in _TERM.findall(query.lower()) if len(t) >= 2))
    kept = [t for t in terms if t not in STOPWORDS] or terms
    if not kept:
        raise MemoryValidationError("the conversation query needs at least one term of two or more characters")
    return kept[:MAX_QUERY_TERMS]


def _check_int(value: Any, label: str, cap: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cap:
        raise MemoryValidationError(f"{label} must be a whole number from 1 to {cap}, not {value!r}")
    return value


def _check_signal(signal: Any) -> None:
    if is_aborted(signal):
        raise ConversationAbortedError("the conversation search was aborted")


def _line(entry: dict[str, Any], detail: str) -> str:
    text = " ".join(str(entry.get("text", "")).split()) if detail == "summary" else str(entry.get("text", ""))
    stamp = f" ({entry.get('timestamp')})" if detail == "full" else ""
    return f"[{entry.get('id')}]{stamp} {entry.get('role')}: {text}"


def branch_page(messages: Sequence[dict[str, Any]] | _Messages, cursor: str, *, limit: int = DEFAULT_PAGE_LIMIT,
                direction: str = "backward", detail: str = "summary") -> BranchPage:  # fmt: skip
    """Given the branch's messages (in order) and a cursor message id, return the page around it.

    ``backward`` ends the page at the cursor, ``forward`` starts it there; ``limit`` is 1..100. A bad
    cursor or limit is answered with ``found: false`` and a reason, as the observational helper does.
    """
    way: Literal["backward", "forward"] = "forward" if direction == "forward" else "backward"
    cursor = cursor.strip() if isinstance(cursor, str) else ""
    source = messages if isinstance(messages, _Messages) else _ListMessages(list(messages))
    if not cursor:
        return BranchPage(found=False, cursor=cursor, direction=way, limit=0, reason="invalid_cursor",
                          text="Invalid cursor; expected a non-empty current-branch entry id.")  # fmt: skip
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_LIMIT:
        return BranchPage(found=False, cursor=cursor, direction=way, limit=limit if isinstance(limit, int) else 0,
                          reason="limit_exceeded",
                          text=f"Page limit must be a positive integer at most {MAX_PAGE_LIMIT}.")  # fmt: skip
    index = source.index_of(cursor)
    if index is None:
        return BranchPage(found=False, cursor=cursor, direction=way, limit=limit, reason="cursor_not_found",
                          text=f"Cursor entry {cursor} was not found on the current branch.")  # fmt: skip
    total = source.count()
    start = max(0, index - limit + 1) if way == "backward" else index
    end = index + 1 if way == "backward" else min(total, index + limit)
    page = source.slice(start, end)
    before = source.at(start - 1) if start > 0 else None
    after = source.at(end) if end < total else None
    next_cursor = before if way == "backward" and start > 0 else after
    prev_cursor = after if way == "forward" and end < total else before
    text = "\n".join(_line(e, "full" if detail == "full" else "summary") for e in page) or "none"
    return BranchPage(found=True, cursor=cursor, direction=way, limit=limit, entries=page,
                      next_cursor=next_cursor, prev_cursor=prev_cursor, text=text)  # fmt: skip


class _Messages:
    """Random access to a branch's messages by ordinal: what the page helper needs."""

    def count(self) -> int:
        raise NotImplementedError

    def index_of(self, entry_id: str) -> int | None:
        raise NotImplementedError

    def slice(self, start: int, end: int) -> list[dict[str, Any]]:
        raise NotImplementedError

    def at(self, index: int) -> str | None:
        raise NotImplementedError


class _ListMessages(_Messages):
    def __init__(self, messages: list[dict[str, Any]]) -> None:
        self.messages = messages
        self.ids = {str(m.get("id")): i for i, m in enumerate(messages)}

    def count(self) -> int:
        return len(self.messages)

    def index_of(self, entry_id: str) -> int | None:
        return self.ids.get(entry_id)

    def slice(self, start: int, end: int) -> list[dict[str, Any]]:
        return self.messages[start:end]

    def at(self, index: int) -> str | None:
        return str(self.messages[index].get("id")) if 0 <= index < len(self.messages) else None


class _LedgerMessages(_Messages):
    """The messages of a ledger session, read by their ordinal (``mpos``) through an index."""

    def __init__(self, session: LedgerSession) -> None:
        self.session = session

    def _one(self, sql: str, params: tuple[Any, ...]) -> Any:
        with self.session.ledger.database.read() as conn:
            return conn.execute(sql, params).fetchone()

    def count(self) -> int:
        # ordinals are dense from 0, so the last one (an index lookup) gives the count without a scan
        row = self._one("SELECT MAX(mpos) FROM ledger_entries WHERE session_key = ? AND mpos IS NOT NULL",
                        (self.session.key,))  # fmt: skip
        return 0 if row[0] is None else int(row[0]) + 1

    def index_of(self, entry_id: str) -> int | None:
        row = self._one(
            "SELECT mpos, role FROM ledger_entries WHERE session_key = ? AND entry_id = ? AND mpos IS NOT NULL",
            (self.session.key, entry_id),
        )
        return None if row is None or row[1] not in MESSAGE_ROLES else int(row[0])

    def slice(self, start: int, end: int) -> list[dict[str, Any]]:
        with self.session.ledger.database.read() as conn:
            rows = conn.execute(
                "SELECT entry_id, role, text, timestamp FROM ledger_entries WHERE session_key = ? AND mpos >= ? "
                "AND mpos < ? ORDER BY mpos", (self.session.key, start, end),
            ).fetchall()  # fmt: skip
        return [{"type": "message", "id": r[0], "role": r[1], "text": r[2], "timestamp": r[3]} for r in rows]

    def at(self, index: int) -> str | None:
        row = self._one("SELECT entry_id FROM ledger_entries WHERE session_key = ? AND mpos = ?",
                        (self.session.key, index))  # fmt: skip
        return None if row is None else str(row[0])


class LedgerSource:
    """A ledger session as the fabric's ``observational`` source: ``session.entries()``, observation
    and reflection lookups by id, and an indexed conversation search over its branch."""

    def __init__(self, session: LedgerSession) -> None:
        self.session = session

    def observation(self, obs_id: str) -> dict[str, Any] | None:
        found = self.session.observation(obs_id)
        if found is None:
            return None
        return {"type": "observation", "id": found.id, "content": found.content, "timestamp": found.timestamp,
                "source_entry_ids": found.source_entry_ids, "folded_into": found.folded_into}  # fmt: skip

    def reflection(self, refl_id: str) -> dict[str, Any] | None:
        found = self.session.reflection(refl_id)
        return None if found is None else found.model_dump()

    def messages(self) -> _Messages:
        return _LedgerMessages(self.session)

    def candidates(self, terms: list[str], top_k: int, signal: Any) -> tuple[list[tuple[str, float, str]], int]:
        """Given query terms, return the best ``top_k`` messages as (entry id, coverage, timestamp) and
        how many messages were scored (those holding at least one term)."""
        return best_messages(self.session, terms, top_k, signal)


def search_conversation(
    source: Any,
    query: str,
    *,
    limit: int = DEFAULT_PAGE_LIMIT,
    direction: str = "backward",
    detail: str = "summary",
    top_k: int = DEFAULT_TOP_K,
    signal: Any = None,
) -> ConversationResult:
    """Given an observational source and a query, return ``{hits, scanned}``: the best ``top_k``
    messages by query-term coverage, each with the branch page around it.

    Raises MemoryValidationError without a source, for an empty query, ``limit`` or ``top_k`` outside
    1..100, or an unknown direction/detail; ConversationAbortedError once ``signal`` is set.
    """
    if source is None or not callable(getattr(getattr(source, "session", None), "entries", None)):
        raise MemoryValidationError("conversation search needs an observational session (observational=...)")
    _check_signal(signal)
    terms = conversation_terms(query)
    page_limit = _check_int(limit, "limit", MAX_PAGE_LIMIT)
    k = _check_int(top_k, "top_k", MAX_PAGE_LIMIT)
    if direction not in ("backward", "forward"):
        raise MemoryValidationError(f"direction is 'backward' or 'forward', not {direction!r}")
    if detail not in ("summary", "full"):
        raise MemoryValidationError(f"detail is 'summary' or 'full', not {detail!r}")
    with _holding(source):  # on PostgreSQL, one pooled connection for the search and its pages
        return _search(source, terms, page_limit, direction, detail, k, signal)


def _holding(source: Any) -> AbstractContextManager[Any]:
    return source.session.ledger.database.read() if isinstance(source, LedgerSource) else nullcontext()


def _search(source: Any, terms: list[str], page_limit: int, direction: str, detail: str, k: int,
            signal: Any) -> ConversationResult:  # fmt: skip
    if isinstance(source, LedgerSource):
        best, scanned = source.candidates(terms, k, signal)
        messages: Sequence[dict[str, Any]] | _Messages = source.messages()
    else:
        entries = [e for e in source.session.entries() if _is_message(e)]
        scored = []
        for i, entry in enumerate(entries):
            if i % _PROGRESS_STEPS == 0:
                _check_signal(signal)
            words = set(_TERM.findall(str(entry.get("text", "")).lower()))
            share = sum(1 for t in terms if t in words) / len(terms)
            if share > 0:
                scored.append((str(entry["id"]), share, str(entry.get("timestamp", ""))))
        scored.sort(key=lambda s: s[0])
        scored.sort(key=lambda s: (s[1], s[2]), reverse=True)
        best, scanned, messages = scored[:k], len(entries), entries
    hits = []
    for entry_id, score, stamp in best:
        _check_signal(signal)
        page = branch_page(messages, entry_id, limit=page_limit, direction=direction, detail=detail)
        if page.found:
            hits.append(ConversationHit(entry_id=entry_id, score=score, timestamp=stamp, page=page))
    return ConversationResult(hits=hits, scanned=scanned)


def _is_message(entry: Any) -> bool:
    return isinstance(entry, dict) and entry.get("type", "message") == "message" and entry.get("role") in MESSAGE_ROLES


def render_transcript(session: LedgerSession, *, until: str | None = None) -> str:
    """Given a session, return its transcript as Markdown: one ``[id] (time) role: text`` per message,
    observations and reflections inline, work scopes as their open/close lines. With ``until`` (a
    canonical instant), only the entries stamped by then: the transcript as it stood at that instant."""
    lines = [f"# session {session.id}", ""]
    for entry in session.iter_entries():
        if until is not None and entry.timestamp > until:
            continue
        if entry.type == "message":
            # one line per entry, so the line of a message is its branch position + TRANSCRIPT_HEADER_LINES + 1
            lines.append(f"[{entry.id}] ({entry.timestamp}) {entry.role}: {' '.join(entry.text.split())}")
        elif entry.type in ("observation", "reflection"):
            lines.append(f"> {entry.type} {entry.ref} ({entry.timestamp}): {' '.join(entry.text.split())}")
        elif entry.type == "om.scope.open":
            lines.append(f"> scope {entry.ref} opened ({entry.timestamp}): {entry.text}")
        elif entry.type == "om.scope.close":
            lines.append(f"> scope {entry.ref} closed ({entry.timestamp})")
        elif entry.type == "om.scope.bound":
            lines.append(f"> reflection {entry.ref} bound to scope {entry.data.get('scope_id')}")
        else:
            lines.append(f"> {entry.type} {entry.ref}")
    return "\n".join(lines) + "\n"


def episode_note(observation: Observation, scope: Scope | None = None) -> MemoryNote:
    """Given an observation, return its ``episode`` view (what ``remember(kind="episode")`` returns)."""
    return MemoryNote(id=observation.id, kind="episode", content=observation.content, name=observation.id,
                      ingested_at=observation.timestamp, created_at=observation.timestamp,
                      token_count=estimate_tokens(observation.content),
                      source_entry_ids=observation.source_entry_ids, scope=scope)  # fmt: skip


def episode_recall(embedder: Any, observations: Sequence[Observation], query: str, *, top_k: int,
                   scope: Scope | None = None) -> list[tuple[RecallHit, ExplainRow]]:  # fmt: skip
    """Given observations and a query, return the ``top_k`` episode views by cosine similarity of the
    embedder's vectors (the newest MAX_EPISODE_CANDIDATES observations are considered), best first."""
    import numpy as np

    pool = sorted(observations, key=lambda o: o.timestamp)[-MAX_EPISODE_CANDIDATES:]
    if not pool:
        return []
    vectors = np.asarray(embedder.embed([query, *(o.content for o in pool)]), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    sims = (vectors[1:] @ vectors[0]) / (norms[1:] * norms[0])
    order = sorted(range(len(pool)), key=lambda i: (-float(sims[i]), pool[i].id))[:top_k]
    out = []
    for i in order:
        score = max(0.0, min(1.0, float(sims[i])))
        if score <= 0:
            continue
        note = episode_note(pool[i], scope)
        out.append((RecallHit(**note.model_dump(), score=score, similarity=score),
                    ExplainRow(id=note.id, score=score, similarity=score)))  # fmt: skip
    return out
