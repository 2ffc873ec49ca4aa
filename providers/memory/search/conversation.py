"""``x-conversation`` search: messages of one session's branch, each hit the message's line in its transcript."""

from __future__ import annotations

from afi.errors import NotFound
from afi.model import ConversationQuery, Match, MatchPage

from ..ledger.conversation import TRANSCRIPT_HEADER_LINES, LedgerSource, search_conversation
from ..ledger.ledger import Ledger

__all__ = ["conversation_matches"]


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
