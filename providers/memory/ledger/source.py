"""The ledger as the fabric's observational source, so a space's fabric can promote its reflections.

The fabric asks its source for ``reflection(id)`` (to promote a reflection bound to a closed work
scope into a fact or procedure, with ``promoted_from``) and ``observation(id)`` (for episode notes),
each as a plain mapping (docs/memory-fabric.md, "Observational memory").
"""

from __future__ import annotations

from typing import Any

from .ledger import Ledger

__all__ = ["LedgerSource"]


class LedgerSource:
    """One space's ledger, answering the fabric's lookups by id."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def reflection(self, reflection_id: str) -> dict[str, Any] | None:
        found = self.ledger.reflection(reflection_id)
        return None if found is None else found.model_dump()

    def observation(self, observation_id: str) -> dict[str, Any] | None:
        found = self.ledger.observation(observation_id)
        return None if found is None else found.model_dump()
