"""A note's front-matter fields written without a YAML emitter, byte for byte as the emitter writes them.

A note's fields are mostly ids, words, times, numbers, lists of words and small mappings of those.
For such a value the emitter's choice is simple (plain when YAML reads it back as the same text, else
single-quoted; block lists without indent under a key; nested mappings indented by two) and is made
here about ten times faster than a dump (which took most of a synced note's time). Any other value
(a quote, a colon, a newline, non-ASCII text, deeper nesting) gets None, and the caller dumps it.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import yaml

__all__ = ["field_lines", "scalar"]

# what YAML reads a plain scalar as: a value it would read as anything but text is written quoted
_RESOLVER = yaml.resolver.Resolver()
_STR_TAG = "tag:yaml.org,2002:str"
_FLOAT_TAG = "tag:yaml.org,2002:float"
# text the emitter may write plain (no indicator, quote, '#', break, colon before a space, or space at
# either end), its plain-or-quoted choice left to the resolver; short, so that no line is ever folded
_CHAR = r"[0-9A-Za-z_./+-]|:(?=[0-9A-Za-z_./+-])"
_SIMPLE = re.compile(rf"[0-9A-Za-z_](?:{_CHAR})*(?: (?:{_CHAR})+)*")
_MAX_SIMPLE = 1000
_MAX_KEY = 127  # the emitter writes a longer key as a complex one (``? key``)


def scalar(value: Any) -> str | None:
    """Given a JSON scalar, return it as the emitter writes it after ``key: `` or ``- ``, or None when
    it is not one this module writes."""
    if isinstance(value, str):
        return _text(value) if len(value) <= _MAX_SIMPLE else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # the representer's: repr, lowered, with ".0" before an exponent that has no point
        text = repr(value).lower()
        if "." not in text and "e" in text:
            text = text.replace("e", ".0e", 1)
        tag = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
        return text if tag == _FLOAT_TAG else None
    return None


@functools.lru_cache(maxsize=4096)  # the same words (kinds, statuses, tags, keys) come back note after note
def _text(value: str) -> str | None:
    if not _SIMPLE.fullmatch(value):
        return None
    plain = _RESOLVER.resolve(yaml.ScalarNode, value, (True, False)) == _STR_TAG  # type: ignore[no-untyped-call]
    return value if plain else f"'{value}'"


@functools.lru_cache(maxsize=1024)
def _key(key: Any) -> str | None:
    return scalar(key) if isinstance(key, str) and len(key) <= _MAX_KEY else None


def _mapping(value: dict[str, Any], first: str, rest: str) -> str | None:
    """A mapping of scalars, its first line led by ``first`` and the others by ``rest``."""
    lines: list[str] = []
    for key, item in value.items():
        said_key, said = _key(key), scalar(item)
        if said_key is None or said is None:
            return None
        lines.append(f"{rest if lines else first}{said_key}: {said}\n")
    return "".join(lines) if lines else None


def field_lines(key: str, value: Any) -> str | None:
    """Given a top-level field and its JSON value (not None, not empty), return its lines of the front
    matter, or None when the value is not one this module writes."""
    said_key = _key(key)
    if said_key is None:
        return None
    if type(value) is str:  # the most fields, first
        said = _text(value) if len(value) <= _MAX_SIMPLE else None
        return None if said is None else f"{said_key}: {said}\n"
    if isinstance(value, list):
        items = []
        for item in value:
            said = _mapping(item, "- ", "  ") if isinstance(item, dict) else scalar(item)
            if said is None:
                return None
            items.append(said if isinstance(item, dict) else f"- {said}\n")
        return f"{said_key}:\n{''.join(items)}" if items else None
    if isinstance(value, dict):
        said = _mapping(value, "  ", "  ")
        return None if said is None else f"{said_key}:\n{said}"
    said = scalar(value)
    return None if said is None else f"{said_key}: {said}\n"
