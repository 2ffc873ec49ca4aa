"""What a note version is when it is read: how ``/history`` and ``/.afi/at/<instant>/`` show a stored row.

A row keeps the Markdown it was written with: its ``status: active`` says the row is neither forgotten
nor held (what every query asks), and a retired row keeps the ``valid_to`` and ``updated_at`` its
retirement gave it. What a version *is* depends on the instant it is looked at, so it is said when it
is read, from the row and its successor:

- ``status``: ``superseded``, followed by ``superseded_by: <id>``, once a successor written by then
  retired it; ``expired`` once its ``valid_to`` has passed without one; ``scheduled`` while its
  ``valid_from`` is still to come; else ``active``.
- at a past instant, what later writes gave the row is left out: a ``valid_to`` set since (by a
  successor or a restore: :func:`~..fabric.clock.ended_after`), and an ``updated_at`` or
  ``ingested_at`` after the instant. An end the version was written with stays.

The stored text is edited field by field (each of those fields is one line of the front matter,
:func:`~..fabric.render.render_field`), so a listing says a version's size from its row without
reading its text, and :func:`widening` tells search which rows a literal may match only in a line
added here. A bundle keeps the rows as stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from afi.storage.engine import Engine

from ..fabric.clock import ended_after
from ..fabric.render import render_field

__all__ = ["ACTIVE", "EXPIRED", "SCHEDULED", "SUPERSEDED", "Facts", "Shown", "facts_sql", "shown", "widening"]

ACTIVE, SUPERSEDED, EXPIRED, SCHEDULED = "active", "superseded", "expired", "scheduled"
_MARKS = {SUPERSEDED: "s", EXPIRED: "e", SCHEDULED: "f", "valid_to": "v", "updated_at": "u", "ingested_at": "i"}
_STORED = render_field("status", ACTIVE)


def facts_sql(engine: Engine, table: str = "notes") -> str:
    """The columns :class:`Facts` is read from, for a row of ``table`` (a name or an alias): its window
    and, once it has ended, its first visible successor as ``"<id> <created_at>"``: one probe of an
    index of names (a successor keeps its predecessor's kind and name), SQLite's (kind, name) index, or
    PostgreSQL's file-name index (its only one)."""
    t = table
    named = engine.same_name("s", t)
    successor = (
        f"SELECT s.id || ' ' || s.created_at FROM notes s WHERE s.tenant_id = {t}.tenant_id "
        f"AND s.resource_id = {t}.resource_id AND s.thread_id = {t}.thread_id AND s.kind = {t}.kind "
        f"AND {named} AND s.supersedes = {t}.id AND s.status = 'active' ORDER BY s.created_at, s.seq LIMIT 1"
    )
    return f"{t}.valid_from, {t}.valid_to, CASE WHEN {t}.valid_to IS NULL THEN NULL ELSE ({successor}) END"


@dataclass(frozen=True)
class Facts:
    """What decides how a version reads: its window, its times, and its first successor (``"<id> <created_at>"``)."""

    valid_from: str | None
    valid_to: str | None
    ingested_at: str | None
    updated_at: str | None
    successor: str | None


@dataclass(frozen=True)
class Shown:
    """How a version reads: its status, its successor, and the (field, value) lines a past view leaves out."""

    status: str = ACTIVE
    superseded_by: str | None = None
    hidden: tuple[tuple[str, str], ...] = ()

    @property
    def as_stored(self) -> bool:
        return self.status == ACTIVE and not self.hidden

    @property
    def mark(self) -> str:
        """A few letters that tell this reading from the stored one (an etag carries them)."""
        return "".join(_MARKS.get(name, "") for name in (self.status, *(field for field, _ in self.hidden)))

    def _edits(self) -> list[tuple[str, str]]:
        edits = [(render_field(field, value), "") for field, value in self.hidden]
        if self.status != ACTIVE:
            by = render_field("superseded_by", self.superseded_by) if self.superseded_by else ""
            edits.insert(0, (_STORED, render_field("status", self.status) + by))
        return edits

    def text(self, rendered: str) -> str:
        """Given the stored Markdown, return the version's text."""
        end = rendered.find("\n---\n", 3)
        if self.as_stored or not rendered.startswith("---\n") or end < 0:
            return rendered
        front = rendered[: end + 1]
        for old, new in self._edits():
            # a field's line starts the line: values that span lines are indented or listed ("- ")
            found = front.find("\n" + old)
            if found >= 0:
                front = front[: found + 1] + new + front[found + 1 + len(old) :]
        return front + rendered[end + 1 :]

    def size(self, stored: int) -> int:
        """Given the stored Markdown's size in bytes, return the text's."""
        return stored + sum(len(new.encode()) - len(old.encode()) for old, new in self._edits())

    def mtime(self, created_at: str, updated_at: str | None, ingested_at: str | None) -> str:
        """The version's modification time among the times it shows."""
        hidden = {field for field, _ in self.hidden}
        updated = None if "updated_at" in hidden else updated_at
        ingested = None if "ingested_at" in hidden else ingested_at
        return updated or ingested or created_at


def shown(facts: Facts, at: str, *, past: bool) -> Shown:
    """Given a row's facts and the instant it is read at (``past``: a ``/.afi/at`` view, else now),
    return how it reads."""
    successor, _, successor_at = facts.successor.partition(" ") if facts.successor else (None, "", None)
    valid_to = facts.valid_to
    hidden: list[tuple[str, str]] = []
    if past:
        succeeded = None if successor_at is None else successor_at > at
        if valid_to is not None and ended_after(valid_to, facts.updated_at, at, succeeded):
            hidden.append(("valid_to", valid_to))
            valid_to = None
        times = (("ingested_at", facts.ingested_at), ("updated_at", facts.updated_at))
        hidden += [(field, value) for field, value in times if value is not None and value > at]
    if valid_to is not None and successor is not None and successor_at is not None and successor_at <= at:
        return Shown(SUPERSEDED, successor, tuple(hidden))
    if valid_to is not None and valid_to <= at:
        return Shown(EXPIRED, None, tuple(hidden))
    if facts.valid_from is not None and facts.valid_from > at:
        return Shown(SCHEDULED, None, tuple(hidden))
    return Shown(ACTIVE, None, tuple(hidden))


# the lines a reading adds: a status other than "active", and "superseded_by: <id>" (quoted when
# YAML would read the id as a number)
_ADDED = tuple(render_field("status", word).rstrip("\n") for word in (SUPERSEDED, EXPIRED, SCHEDULED))
_BY = render_field("superseded_by", "x")[:-2]  # "superseded_by: "
_BY_TAIL = re.compile(r"'?[0-9a-f]{0,20}'?")
_HEX = re.compile(r"[0-9a-f]{1,20}")


def widening(literals: list[str]) -> tuple[list[str], list[str]] | None:
    """Given the literals grep asks the trigram index for, say which rows of ``/history`` may match
    only through a line a reading adds (:class:`Shown`), which the index never saw. None: no literal
    can lie in such a line. Else (rest, ids): such rows hold the ``rest`` of the literals, and, when
    ``ids`` is not empty, they are the rows whose successor's id holds one of ``ids``; with ``ids``
    empty, any row with a ``valid_to`` or a ``valid_from`` may be one. Lines are matched one by one,
    so a literal lies within one line."""
    added = [literal for literal in literals if _kind(literal) is not None]
    if not added:
        return None
    rest = [literal for literal in literals if literal not in added]
    if all(_kind(literal) == "id" for literal in added):
        return rest, [literal.casefold() for literal in added]
    return rest, []


def _kind(literal: str) -> str | None:
    """Where a literal may lie in an added line: "status" (a status line, or a part of
    "superseded_by: " and what follows), "id" (within an id only), or None (in none: the index holds it)."""
    low = literal.casefold()
    if any(low in line for line in _ADDED) or low in _BY:
        return "status"
    if any(_BY.endswith(low[:i]) and _BY_TAIL.fullmatch(low[i:]) for i in range(1, len(low))):
        return "status"
    if _HEX.fullmatch(low):
        return "id"
    return "status" if _BY_TAIL.fullmatch(low) else None
