"""Opaque paging cursors: a tagged, base64url JSON position that a client cannot forge into a count."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from afi.errors import InvalidPath

__all__ = ["decode_cursor", "encode_cursor"]

# What each kind's position holds: a client may send any JSON in a cursor, so each field is checked.
_FIELDS: dict[str, dict[str, type]] = {"list": {"a": str}, "semantic": {"o": int}}  # grep checks its own


def encode_cursor(kind: str, position: dict[str, Any]) -> str:
    """Given a cursor kind (``list``, ``search``) and a position, return the opaque cursor string."""
    raw = json.dumps({"k": kind, **position}, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(kind: str, cursor: str | None) -> dict[str, Any] | None:
    """Given a cursor from a client, return its position (``None`` for no cursor).

    Raises:
        InvalidPath: the cursor is malformed or was issued for another verb.
    """
    if cursor is None or cursor == "":
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: JSON nested too deep
        raise InvalidPath("the cursor is not one this server issued; start again without a cursor") from None
    if not isinstance(data, dict) or data.get("k") != kind:
        raise InvalidPath(f"the cursor was not issued by {kind}; start again without a cursor")
    for name, expected in _FIELDS.get(kind, {}).items():
        value = data.get(name)
        if not isinstance(value, expected) or isinstance(value, bool) or (isinstance(value, int) and value < 0):
            raise InvalidPath("the cursor is not one this server issued; start again without a cursor")
    return data
