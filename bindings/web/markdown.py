"""A note's text as the page shows it: its front matter as fields, its content as escaped HTML.

Markdown is rendered by markdown-it-py with raw HTML off, so a note holding ``<script>`` shows that
text, never runs it; link targets go through markdown-it's own check (no ``javascript:`` links).

markdown-it-py costs about 0.5 µs a character of prose, but up to ~50 µs a line or a character it
may read as syntax (list items, ``![``, emphasis runs, table cells), and more on a few shapes: a
megabyte of ``[`` took 18 s. So only a text within :data:`RENDER_MAX_CHARS` characters and
:data:`RENDER_MAX_MARKS` of those (:func:`markup_marks`) is rendered, at most about half a second;
the page shows a longer one as text (a 50 KB README holds about 3,000 of them).
"""

from __future__ import annotations

from typing import Any

import yaml
from markdown_it import MarkdownIt
from markupsafe import Markup

__all__ = [
    "FIELD_ORDER",
    "RENDER_MAX_CHARS",
    "RENDER_MAX_MARKS",
    "markup_marks",
    "render_markdown",
    "split_front_matter",
]

# The fields a person reads first, then the rest in the note's own order.
FIELD_ORDER = (
    "kind", "name", "status", "superseded_by", "valid_from", "valid_to", "tags", "importance", "links", "supersedes"
)  # fmt: skip


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without aliases: ``*a`` repeats a node by reference, so a few hundred bytes of nested
    aliases ("billion laughs") would render as gigabytes of fields."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "aliases are not shown", None)
        return super().compose_node(parent, index)


MAX_FRONT_MATTER = 16 * 1024  # characters; bigger front matter is shown as text (PyYAML parses ~100 KB/s)


_MD = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")
RENDER_MAX_CHARS = 64 * 1024
RENDER_MAX_MARKS = 8_000
_MARKS = "\n[]()!*_`<>|&\\#~"


def markup_marks(text: str) -> int:
    """Given a text, return how many of its characters Markdown may read as syntax (lines included)."""
    return sum(text.count(mark) for mark in _MARKS)


def render_markdown(text: str) -> Markup | None:
    """Given Markdown, return it as HTML in which every raw tag the text holds is escaped; None when it
    is past what the page renders (:data:`RENDER_MAX_CHARS`, :data:`RENDER_MAX_MARKS`): show it as text."""
    if len(text) > RENDER_MAX_CHARS or markup_marks(text) > RENDER_MAX_MARKS:
        return None
    return Markup(_MD.render(text))  # html=False: markdown-it escaped the text's own HTML


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Given a note's text, return its front matter fields (empty when it has none or they do not
    parse as a YAML mapping without aliases in at most :data:`MAX_FRONT_MATTER` characters: then the
    whole text is the content) and the content after them."""
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 3, MAX_FRONT_MATTER + 8)
    if end < 0:
        return {}, text
    try:
        fields = yaml.load(text[4:end], Loader=_NoAliasLoader)
    except (yaml.YAMLError, RecursionError):  # RecursionError: flow collections nested thousands deep
        return {}, text
    if not isinstance(fields, dict):
        return {}, text
    return {str(k): v for k, v in fields.items()}, text[end + 5 :]


def ordered_fields(fields: dict[str, Any]) -> list[tuple[str, Any]]:
    """The front matter fields, the ones a person reads first first."""
    first = [(name, fields[name]) for name in FIELD_ORDER if name in fields]
    return first + [(name, value) for name, value in fields.items() if name not in FIELD_ORDER]
