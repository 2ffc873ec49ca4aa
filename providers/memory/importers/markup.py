"""Reading one Markdown note as Obsidian writes it: YAML front matter, ``#tags``, ``[[wikilinks]]``.

Code (fenced blocks and inline spans) is left out before tags and links are looked for, so a
``#include`` or a ``[[x]]`` inside code is neither.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any
from urllib.parse import unquote

import yaml

from afi.errors import AfiError

from ..fabric.errors import MemoryValidationError
from ..fabric.fields import canonical_time
from ..fabric.front_matter import load_front_matter, yaml_problem
from .plan import bad_input

__all__ = ["Markup", "parse_markup"]

_PROCEDURE_KINDS = frozenset({"procedure", "procedures", "how-to", "howto", "runbook", "recipe", "playbook"})
_MAPPED = frozenset({"tags", "tag", "aliases", "alias", "kind", "type", "created", "date"})
_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_TAG = re.compile(r"(?:^|(?<=\s))#([\w/-]+)", re.M)
_WIKILINK = re.compile(r"!?\[\[([^\[\]|#^]*)(?:[#^][^\[\]|]*)?(?:\|[^\[\]]*)?\]\]")
_MDLINK = re.compile(r"\[[^\]\n]*\]\(<?([^)\s>]+\.md)>?(?:#[^)\s]*)?(?:\s+\"[^\"]*\")?\)", re.I)


@dataclass
class Markup:
    """What one Markdown file says: its body and what its front matter and text map to."""

    body: str
    kind: str = "fact"
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    valid_from: str | None = None
    context: str | None = None
    wikilinks: list[str] = field(default_factory=list)  # targets as written, without heading or alias
    mdlinks: list[str] = field(default_factory=list)  # relative .md paths as written, URL-decoded


def parse_markup(text: str, where: str) -> Markup:
    """Given a note's text, return its :class:`Markup`.

    Front matter: ``tags``/``tag`` (a list, or a string split at commas and spaces) become tags;
    ``aliases``/``alias`` keywords; ``kind``/``type`` of ``procedure`` (or how-to, runbook, recipe,
    playbook) makes a procedure, any other value is kept as a tag; ``created`` (else ``date``)
    becomes ``valid_from`` when it reads as a date; every other field is kept in ``context`` as
    one line of JSON.

    Raises:
        InvalidPath: the front matter is not closed, not YAML, or not a mapping.
    """
    front, body = _split(text, where)
    markup = Markup(body=body.strip("\n"))
    markup.tags = _words(front.get("tags", front.get("tag")))
    markup.aliases = _words(front.get("aliases", front.get("alias")), split=False)
    for key in ("kind", "type"):
        value = front.get(key)
        if isinstance(value, str) and value.strip():
            if value.strip().lower() in _PROCEDURE_KINDS:
                markup.kind = "procedure"
            elif value.strip().lower() != "fact":
                markup.tags.append(value.strip())
    markup.valid_from = _moment(front.get("created", front.get("date")))
    rest = {str(k): v for k, v in front.items() if str(k) not in _MAPPED}
    if rest:
        markup.context = json.dumps(rest, ensure_ascii=False, sort_keys=True, default=str)
    prose = _INLINE_CODE.sub(" ", _FENCE.sub(" ", markup.body))
    markup.tags = list(dict.fromkeys([*markup.tags, *(t for t in _TAG.findall(prose) if not t.isdigit())]))
    markup.tags = [t.lstrip("#") for t in markup.tags if t.lstrip("#")]
    markup.wikilinks = [t.strip() for t in _WIKILINK.findall(prose) if t.strip()]
    markup.mdlinks = [unquote(t) for t in _MDLINK.findall(prose) if "://" not in t and not t.startswith("/")]
    return markup


def _split(text: str, where: str) -> tuple[dict[str, Any], str]:
    """Given a note's text, return (front matter, body); text without ``---`` first has none."""
    if not text.startswith("---\n"):
        return {}, text
    lines = text.split("\n")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        raise bad_input(where, "the front matter starts with '---' but has no closing '---' line")
    head = "\n".join(lines[1:end])
    try:
        loaded = load_front_matter(head)
    except AfiError as err:
        raise type(err)(f"{where}: {err.message}") from None
    except yaml.YAMLError as err:
        number, problem = yaml_problem(err, head)
        line = f" line {number}" if number is not None else ""
        raise bad_input(f"{where}{line}", f"the front matter is not valid YAML: {problem}") from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise bad_input(where, "the front matter must be a YAML mapping of field: value")
    return loaded, "\n".join(lines[end + 1 :])


def _words(value: Any, *, split: bool = True) -> list[str]:
    """A front-matter list or string as a list of non-empty strings."""
    if value is None:
        return []
    if isinstance(value, str):
        items = re.split(r"[,\s]+", value) if split else [value]
    elif isinstance(value, list):
        items = [str(v) for v in value if v is not None and not isinstance(v, dict | list)]
    else:
        items = [str(value)]
    return [s.strip() for s in items if s.strip() and "\x00" not in s]


def _moment(value: Any) -> str | None:
    """A front-matter date as an ISO instant, or None when it does not read as one."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return f"{value.isoformat()}T00:00:00.000Z"
    if not isinstance(value, datetime | str):
        return None
    try:
        return canonical_time(value.strip() if isinstance(value, str) else value, "created")
    except MemoryValidationError:
        return None
