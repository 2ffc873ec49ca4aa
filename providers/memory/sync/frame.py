"""The frame every streamed sync batch shares: who sent it, for which space, the span of the sender's
change numbers it covers, whether more follow, and its list of items, checked before any item is."""

from __future__ import annotations

from typing import Any

from afi.errors import InvalidPath, TooLarge

__all__ = ["check_frame"]


def check_frame(data: Any, *, what: str, items: str, extra: frozenset[str] = frozenset(), cap: int) -> tuple[int, int]:
    """Given a received batch (``what``: "a file sync batch"...), check its frame: exactly the frame's
    keys, ``items`` and ``extra``; non-empty store and space; ``since`` and ``upto`` change numbers,
    ``upto`` not below ``since``; ``more`` true or false; ``items`` a list of at most ``cap``. Return
    (since, upto). Raises InvalidPath naming what is wrong, TooLarge past the cap."""
    keys = {"store", "space", "since", "upto", "more", items, *extra}
    if not isinstance(data, dict) or set(data) != keys:
        raise InvalidPath(f"{what} is an object of exactly {', '.join(sorted(keys))}")
    if not all(isinstance(data[k], str) and data[k] for k in ("store", "space")):
        raise InvalidPath(f"{what}'s store and space are non-empty strings")
    since, upto = data["since"], data["upto"]
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63 for v in (since, upto)) or (
        upto < since
    ):
        raise InvalidPath(f"{what}'s since and upto are change numbers, upto not below since")
    if not isinstance(data["more"], bool) or not isinstance(data[items], list):
        raise InvalidPath(f"{what}'s more is true or false and its {items} a list")
    if len(data[items]) > cap:
        raise TooLarge(f"{what} holds at most {cap} {items}; this one has {len(data[items])}")
    return since, upto
