"""Reading a note's YAML front matter, whoever wrote it: bounded in size, depth and alias expansion.

Every door that takes a note's Markdown (a write through HTTP, MCP, SSH or the mount, ``afi
import`` of a Markdown folder or a bundle) reads its front matter here, so a hostile one is the
same clear refusal everywhere, decided before the YAML is built: over :data:`MAX_FRONT_MATTER_CHARS`
characters, nested deeper than :data:`MAX_DEPTH` (a thousand ``[`` would otherwise exhaust Python's
stack), or holding more than :data:`MAX_VALUES` values once its aliases (``*a``) are expanded (a
"billion laughs" of a few lines). The check walks the parser's events, which nest without recursion.
"""

from __future__ import annotations

from typing import Any

import yaml

from .errors import MemoryLimitError, MemoryValidationError

__all__ = ["MAX_DEPTH", "MAX_FRONT_MATTER_CHARS", "MAX_VALUES", "load_front_matter", "yaml_problem"]

MAX_FRONT_MATTER_CHARS = 1 << 20  # above every field's cap together (fields.py)
MAX_DEPTH = 32  # a note's fields nest two or three levels (links: a list of mappings)
MAX_VALUES = 100_000

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's when there
_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def load_front_matter(text: str) -> Any:
    """Given the YAML between a note's ``---`` lines, return what it holds (None for nothing).

    Raises:
        MemoryLimitError: over :data:`MAX_FRONT_MATTER_CHARS` characters.
        MemoryValidationError: nested deeper than :data:`MAX_DEPTH`, or over :data:`MAX_VALUES` values
            once its aliases are expanded.
        yaml.YAMLError: not YAML (the caller says where).
    """
    if len(text) > MAX_FRONT_MATTER_CHARS:
        raise MemoryLimitError(f"the front matter has {len(text):,} characters; the cap is {MAX_FRONT_MATTER_CHARS:,}")
    _check_shape(text)
    return yaml.load(text, Loader=_Loader)


def yaml_problem(err: yaml.YAMLError, text: str) -> tuple[int | None, str]:
    """Given a YAML error of :func:`load_front_matter` and the text it read, return the line of the note
    at fault (the front matter starts on its second line; None when the error names none) and what is wrong."""
    mark = getattr(err, "problem_mark", None)
    problem = str(getattr(err, "problem", None) or "cannot be parsed")
    if mark is None:
        return None, problem
    last = text.count("\n") - (1 if text.endswith("\n") else 0)
    return min(mark.line, max(last, 0)) + 2, problem  # libyaml marks an unclosed end a line past the text


def _check_shape(text: str) -> None:
    """Refuse YAML nested too deeply or too large once its aliases are expanded, from its events alone."""
    counts = [0]  # the values inside each collection still open, aliases expanded; [0] is the document
    anchors: list[str | None] = [None]
    sizes: dict[str, int] = {}
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, _OPEN):
            if len(counts) > MAX_DEPTH:
                raise MemoryValidationError(f"the front matter is nested more than {MAX_DEPTH} levels deep")
            counts.append(0)
            anchors.append(event.anchor)
            continue
        if isinstance(event, _CLOSE):
            size = 1 + counts.pop()
            anchor = anchors.pop()
        elif isinstance(event, yaml.ScalarEvent):
            size, anchor = 1, event.anchor
        elif isinstance(event, yaml.AliasEvent):
            size, anchor = sizes.get(event.anchor or "", 1), None
        else:
            continue
        if anchor is not None:
            sizes[anchor] = size
        counts[-1] += size
        if sum(counts) > MAX_VALUES:
            raise MemoryValidationError(
                f"the front matter holds over {MAX_VALUES:,} values once its aliases (*name) are expanded"
            )
