"""Note names from foreign titles: the store's rules (1..200 characters, no ``/`` or NUL, no leading
``.``), made predictable.

A title is slugified: lower-cased, every run of characters other than letters, digits, ``.``, ``_``
and ``-`` becomes one ``-``, and leading/trailing ``-``/``.`` are dropped (``My Note!`` → ``my-note``).
When two titles give the same slug, the first in source order keeps it and the next ones take
``-2``, ``-3``, … (a vault's files are taken in path order, so the same vault gives the same names).
"""

from __future__ import annotations

import re

__all__ = ["MAX_SLUG", "NameBook", "slugify"]

MAX_SLUG = 120  # leaves room for a "-<n>" suffix well inside the store's 200


def slugify(title: str, fallback: str = "note") -> str:
    """Given a title, return its slug (``fallback`` when nothing of it is left)."""
    lowered = "".join(ch if ch.isalnum() or ch in "._-" else " " for ch in title.lower())
    slug = re.sub(r"[\s-]+", "-", lowered.strip()).strip("-.")
    slug = slug[:MAX_SLUG].rstrip("-.")
    return slug or fallback


class NameBook:
    """Hands out unique names per note kind, in the order asked."""

    def __init__(self) -> None:
        self._taken: dict[str, set[str]] = {}

    def claim(self, kind: str, title: str) -> str:
        """Return the slug of ``title``, made unique among this kind's names so far."""
        taken = self._taken.setdefault(kind, set())
        base = slugify(title)
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name)
        return name
