"""How literals become ``ILIKE`` conditions for PostgreSQL's trigram indexes: the rows that may contain them all.

A PostgreSQL store keeps a ``gin_trgm_ops`` index (pg_trgm) on the text grep reads, and that index
serves ``ILIKE '%…%'`` directly, so each literal becomes one ``ILIKE … ESCAPE '\\'`` condition, its
pattern passed as a parameter with ``%``, ``_`` and ``\\`` escaped. Like the SQLite store's FTS5
trigram index (:mod:`.trigram`) the conditions ignore case: a regex with the ``i`` flag hands its
literals over as written, so the rows found must hold them in any case. The rows are candidates
only: the matcher checks every one against the text, so an extra row costs a little and a missed one
is a bug.

``ILIKE`` on a ``COLLATE "C"`` column folds ASCII letters only, while a case-insensitive regex (RE2,
Unicode simple case folding) also equates ``é`` and ``É``, and two ASCII letters with a character
outside ASCII: ``k`` with the Kelvin sign (U+212A) and ``s`` with the long s (U+017F). So:

* the condition reads the text with those two spelled ``k`` and ``s`` (:func:`folded`, the very
  expression the indexes are built on, so ``k`` and ``s`` keep narrowing the lookup);
* a character of the literal outside ASCII that has any case form becomes ``_`` (any one character).

The pattern then holds only ASCII letters, whose lowercase is the same in every locale, so pg_trgm's
own case folding (in the database's locale) never disagrees with ``ILIKE``'s.
"""

from __future__ import annotations

__all__ = ["ESCAPE", "folded", "has_case_forms", "ilike", "like_pattern"]

ESCAPE = "\\"
_SPECIAL = frozenset("%_\\")


def folded(column: str) -> str:
    """The SQL of a text column with the Kelvin sign and the long s spelled ``k`` and ``s``.

    The trigram indexes of the PostgreSQL schema are built on this expression, word for word (the
    planner uses an expression index only for the same expression).
    """
    return f"translate({column}, U&'\\212A\\017F', 'ks')"


def ilike(column: str, placeholder: str = "?") -> str:
    """The condition that the text in ``column`` may hold the literal whose :func:`like_pattern` is
    bound to ``placeholder``."""
    return f"{folded(column)} ILIKE {placeholder} ESCAPE '{ESCAPE}'"


def has_case_forms(ch: str) -> bool:
    """True for a character outside ASCII with any case form (a NUL too, which PostgreSQL text cannot hold)."""
    if ch.isascii():
        return ch == "\x00"
    return ch.lower() != ch or ch.upper() != ch or ch.title() != ch or ch.casefold() != ch


def like_pattern(literal: str) -> str:
    """Given a literal, return the ``ILIKE … ESCAPE '\\'`` pattern of the :func:`folded` texts that may
    hold it in any case."""
    out: list[str] = []
    for ch in literal:
        if has_case_forms(ch):
            out.append("_")
        elif ch in _SPECIAL:
            out.append(ESCAPE + ch)
        else:
            out.append(ch)
    return "%" + "".join(out) + "%"
