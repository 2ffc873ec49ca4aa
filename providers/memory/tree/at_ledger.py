"""``/.afi/at/<instant>/sessions`` and ``/episodes``: the ledger as it stood at an instant, read-only.

The ledger is append-only and every entry carries its time, so its past needs no versions: a
session's transcript at an instant is its entries stamped by then (a session with none did not exist
yet), and the episodes are the observations made by then. An entry's time is the one its writer gave
(messages may carry their own ``timestamp``), so a transcript backfilled later with earlier times shows
those entries at the earlier instants too: the ledger's own timeline, not the order of arrival.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from afi.errors import NotFound
from afi.model import Entry

from ..fabric.render import render_note
from ..ledger.conversation import episode_note, render_transcript
from .notes_view import rendered_etag

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["AT_LEDGER_AREAS", "ledger_list_at", "ledger_text_at"]

AT_LEDGER_AREAS = ("episodes", "sessions")


def _entry(path: str, text: str, ctime: str, mtime: str, kind: str, name: str) -> Entry:
    return Entry(path=path, type="file", size=len(text.encode()), mtime=mtime, ctime=ctime,
                 content_type="text/markdown", etag=rendered_etag(text),
                 attributes={"permissions": "r", "x-kind": kind, "x-id": name})  # fmt: skip


def _session_at(space: Space, at: str, name: str, path: str) -> tuple[Entry, str] | None:
    session = space.ledger.find_session(name)
    if session is None:
        return None
    stamps = [e.timestamp for e in session.iter_entries() if e.timestamp <= at]
    if not stamps:
        return None
    text = render_transcript(session, until=at)
    return _entry(path, text, stamps[0], max(stamps), "session", name), text


def _episode_at(space: Space, at: str, name: str, path: str) -> tuple[Entry, str] | None:
    observation = space.ledger.observation(name)
    if observation is None or observation.timestamp > at:
        return None
    text = render_note(episode_note(observation, space.fabric.memory.scope))
    stamp = observation.timestamp
    return _entry(path, text, stamp, stamp, "episode", name), text


def ledger_text_at(space: Space, at: str, area: str, name: str, path: str) -> tuple[Entry, str]:
    """Given an instant, ``sessions`` or ``episodes`` and ``<id>.md``, return its entry and text then."""
    if not name.endswith(".md") or len(name) <= 3:
        raise NotFound(f"{area} are named <id>.md", path=path)
    found = (_session_at if area == "sessions" else _episode_at)(space, at, name[:-3], path)
    if found is None:
        raise NotFound(f"no such {area[:-1]} at that instant", path=path)
    return found


def ledger_list_at(space: Space, at: str, area: str, folder: str) -> list[Entry]:
    """The sessions (or episodes) of the space as they stood at the instant, by id."""
    found: list[Entry] = []
    if area == "sessions":
        for sid in space.ledger.sessions():
            got = _session_at(space, at, sid, f"{folder}/{sid}.md")
            if got is not None:
                found.append(got[0])
        return found
    scope = space.fabric.memory.scope
    for observation in space.ledger.observations():
        if observation.timestamp <= at:
            text = render_note(episode_note(observation, scope))
            stamp = observation.timestamp
            found.append(_entry(f"{folder}/{observation.id}.md", text, stamp, stamp, "episode", observation.id))
    return found
