"""The ledger as the tree shows it: ``/episodes/<id>.md``, ``/sessions/<id>.md`` and x-conversation search."""

from __future__ import annotations

from afi.errors import NotFound
from afi.model import ConversationQuery, Entry, Match, MatchPage

from .conversation import TRANSCRIPT_HEADER_LINES, LedgerSource, episode_note, render_transcript, search_conversation
from .entries import EPOCH
from .ledger import Ledger
from .notes_view import rendered_etag
from .render import render_note
from .types import Scope

__all__ = ["conversation_matches", "ledger_text"]


def ledger_text(ledger: Ledger, scope: Scope, path: str) -> tuple[Entry, str]:
    """Given an /episodes or /sessions path, return its entry and its text (an episode view or a transcript)."""
    area, _, rest = path[1:].partition("/")
    name = rest[:-3]
    if area == "episodes":
        obs = ledger.observation(name)
        if obs is None:
            raise NotFound("no such episode", path=path)
        text = render_note(episode_note(obs, scope))
        mtime = ctime = obs.timestamp
    else:
        session = ledger.find_session(name)
        if session is None:
            raise NotFound("no such session", path=path)
        text = render_transcript(session)
        ctime = mtime = EPOCH
        stamps = [e.timestamp for e in session.iter_entries()]
        if stamps:
            ctime, mtime = stamps[0], max(stamps)
    entry = Entry(path=path, type="file", size=len(text.encode()), mtime=mtime, ctime=ctime,
                  content_type="text/markdown", etag=rendered_etag(text),
                  attributes={"permissions": "r", "x-kind": "episode" if area == "episodes" else "session",
                              "x-id": name})  # fmt: skip
    return entry, text


def conversation_matches(ledger: Ledger, query: ConversationQuery, top_k: int) -> MatchPage:
    """Run an x-conversation query: each hit is the message's line in its session's transcript."""
    session = ledger.find_session(query.session)
    if session is None:
        raise NotFound("no such session", path=f"/sessions/{query.session}.md")
    result = search_conversation(LedgerSource(session), query.conversation, limit=query.page_limit,
                                 direction=query.direction, detail=query.detail, top_k=top_k)  # fmt: skip
    matches = []
    for hit in result.hits:
        entry = session.entry(hit.entry_id)
        assert entry is not None
        line = f"[{entry.id}] ({entry.timestamp}) {entry.role}: {' '.join(entry.text.split())}"
        explain = {"entry_id": hit.entry_id, "timestamp": hit.timestamp, "scanned": result.scanned,
                   "page": hit.page.model_dump(exclude_none=True)}  # fmt: skip
        matches.append(Match(path=f"/sessions/{session.id}.md", line=entry.position + TRANSCRIPT_HEADER_LINES + 1,
                             text=line if len(line) <= 256 else line[:255] + "…", score=hit.score,
                             x_explain=explain, x_id=hit.entry_id, x_kind="message"))  # fmt: skip
    return MatchPage(matches=matches)
