"""A note version as a sync carries it, and the one rule that merges two states of one version.

A state is every column of the note's row that is not derived (the bundle's front matter, content
included), as plain JSON. Two stores that hold different states of one version id (each rewrote it in
place: a fold, a retirement, a legal hold) both end with :func:`merge` of the two, whichever applies
first, because the rule only compares the states themselves:

- the state written last wins (``updated_at``, else ``created_at``; then ``ingested_at``; then the
  digest, so a tie has one answer);
- tags, keywords, sources and links are the winner's followed by what only the loser had (each
  side's additions stay);
- a legal hold on either side holds (with the earlier ``forgotten_at``);
- a loser whose content differs is kept as a retired version of its own (:func:`kept_loser`), with an
  id both stores derive alike, so no text is lost to the merge.

Identity: a version id that names notes of two kinds is not merged: the batch carrying it is refused
(:class:`~afi.errors.Conflict`), nothing changes. One id written on both sides for one kind (an
explicit id, given on each machine) is one note written twice: merged, the losing text kept.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import ValidationError

from afi.errors import Conflict, InvalidPath

from ..fabric.fields import ID_DIGITS
from ..fabric.rows import NOTE_COLUMNS, note_state
from ..fabric.types import MemoryNote, Scope

__all__ = ["FIELDS", "digest", "kept_loser", "merge", "note_of", "state_of"]

FIELDS = NOTE_COLUMNS
_FIELD_SET = frozenset(FIELDS)
_UNIONS = ("tags", "keywords", "source_entry_ids")


def state_of(note: MemoryNote) -> dict[str, Any]:
    """Given a stored note, return its state: every stored field as JSON values."""
    return note_state(note)


def note_of(state: Any, scope: Scope, where: str) -> MemoryNote:
    """Given a state received from a peer, return the note it describes; InvalidPath naming ``where``
    and the field when it is not one."""
    if not isinstance(state, dict):
        raise InvalidPath(f"{where}: a note state is an object of its fields")
    if state.keys() != _FIELD_SET:
        missing = [key for key in FIELDS if key not in state]
        unknown = sorted(str(key) for key in state if key not in _FIELD_SET)
        said = "; ".join(x for x in (missing and f"missing {', '.join(missing)}", unknown and
                                      f"unknown {', '.join(unknown)}") if x)  # fmt: skip
        raise InvalidPath(f"{where}: {said}")
    try:
        return MemoryNote(**state, scope=scope)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise InvalidPath(f"{where}: field {field}: {first['msg']}") from None


def digest(state: dict[str, Any]) -> str:
    """The SHA-256 of a state's canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _written(state: dict[str, Any]) -> tuple[str, str, str]:
    return (state["updated_at"] or state["created_at"], state["ingested_at"], digest(state))


def _union(first: list[Any], second: list[Any]) -> list[Any]:
    return [*first, *(item for item in second if item not in first)]


def _link_key(link: dict[str, Any]) -> tuple[Any, Any]:
    return (link.get("id"), link.get("relation", "related"))


def merge(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """Given two states of one version, return the state both stores keep (the same whichever is ours).

    Raises Conflict when the two are notes of different kinds under one id.
    """
    if ours == theirs:
        return ours
    if ours["kind"] != theirs["kind"]:
        raise Conflict(
            f"note id {ours['id']} names two different notes (a {ours['kind']} here, a {theirs['kind']} on the "
            "peer): nothing was merged"
        )
    winner, loser = (ours, theirs) if _written(ours) >= _written(theirs) else (theirs, ours)
    out = dict(winner)
    for key in _UNIONS:
        out[key] = _union(winner[key] or [], loser[key] or [])
    seen = {_link_key(link) for link in winner["links"]}
    out["links"] = [*winner["links"], *(link for link in loser["links"] if _link_key(link) not in seen)]
    held = [s for s in (winner, loser) if s["status"] == "legal_hold"]
    if held:
        out["status"] = "legal_hold"
        out["forgotten_at"] = min((s["forgotten_at"] for s in held if s["forgotten_at"]), default=None)
    return out


def kept_loser(ours: dict[str, Any], theirs: dict[str, Any], merged: dict[str, Any]) -> dict[str, Any] | None:
    """Given the two states :func:`merge` merged and its result, return the loser's content kept as a
    retired version of its own (an id derived from the version's and the loser's digest, an empty
    validity window at the merge's instant, no name so it never holds one), or None when no text was lost."""
    loser = theirs if merged["content"] == ours["content"] else ours
    if loser["content"] == merged["content"]:
        return None
    at = merged["updated_at"] or merged["created_at"]
    kept = dict(loser)
    kept["id"] = hashlib.sha256(f"sync\x00{loser['id']}\x00{digest(loser)}".encode()).hexdigest()[:ID_DIGITS]
    kept["name"] = None
    kept["valid_from"] = at if loser["valid_from"] is None or loser["valid_from"] > at else loser["valid_from"]
    kept["valid_to"] = at
    kept["supersedes"] = None
    kept["links"] = [*loser["links"], {"id": loser["id"], "relation": "merged_into"}]
    return kept
