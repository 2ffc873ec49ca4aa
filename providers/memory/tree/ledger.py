"""``/episodes`` and ``/sessions``: the ledger as the tree shows it, read-only.

``/episodes/<id>.md`` is an observation rendered as an episode note; ``/sessions/<id>.md`` is a
session's transcript (its branch of messages, one per line).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from afi.errors import NotFound
from afi.model import Entry

from ..fabric.render import render_note
from ..fabric.types import Scope
from ..ledger.conversation import episode_note, render_transcript
from ..ledger.ledger import Ledger
from .base import Area
from .entries import EPOCH
from .locate import Node
from .notes_view import rendered_etag

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["EpisodesArea", "SessionsArea", "ledger_text"]


class EpisodesArea(Area):
    """One episode view per observation of the space's ledger."""

    def children(self, space: Space) -> list[Entry]:
        scope = space.fabric.memory.scope
        return [ledger_text(space.ledger, scope, f"/episodes/{o.id}.md")[0] for o in space.ledger.observations()]

    def text(self, space: Space, node: Node) -> tuple[Entry, str]:
        node.note_name  # noqa: B018 - refuses nested or non-.md names
        return ledger_text(space.ledger, space.fabric.memory.scope, node.path)


class SessionsArea(Area):
    """One transcript per session of the space's ledger."""

    def children(self, space: Space) -> list[Entry]:
        scope = space.fabric.memory.scope
        return [ledger_text(space.ledger, scope, f"/sessions/{sid}.md")[0] for sid in space.ledger.sessions()]

    def text(self, space: Space, node: Node) -> tuple[Entry, str]:
        node.note_name  # noqa: B018 - refuses nested or non-.md names
        return ledger_text(space.ledger, space.fabric.memory.scope, node.path)


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
