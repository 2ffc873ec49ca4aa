"""The attach gate: which session may drive the fabric's tools and workers."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from .errors import MemoryScopeError

__all__ = ["Attachment", "check_session"]


def check_session(session: Any, observational: Any) -> str:
    """Given a session, return its id; raise MemoryScopeError unless it has a non-empty ``id`` and a
    callable ``entries``, and (when the fabric has an observational source) is that very session."""
    session_id = getattr(session, "id", None)
    if not isinstance(session_id, str) or not session_id:
        raise MemoryScopeError("attach requires a session with a non-empty id")
    if not callable(getattr(session, "entries", None)):
        raise MemoryScopeError("attach requires a session whose entries is callable")
    source = getattr(observational, "session", None) if observational is not None else None
    if source is not None and source is not session and getattr(source, "id", None) != session_id:
        raise MemoryScopeError(
            f"session {session_id} is not the fabric's observational session {getattr(source, 'id', '?')}"
        )
    return session_id


@dataclass(eq=False)
class Attachment:
    """An attached session: its context provider, the fabric settings, and ``detach()``."""

    session: Any
    context_provider: Any
    settings: Any
    _gate: dict[str, Any] = field(repr=False, default_factory=dict)
    _lock: threading.Lock = field(repr=False, default_factory=threading.Lock)

    def detach(self) -> None:
        """Close the gate for this session; calling it twice is harmless."""
        with self._lock:
            if self._gate.get("session") is self.session:
                self._gate.pop("session", None)
