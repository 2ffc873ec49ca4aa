"""The MCP reference memory server's knowledge graph (``memory.jsonl``/``memory.json``).

One JSON object a line: ``{"type": "entity", "name", "entityType", "observations": [...]}`` or
``{"type": "relation", "from", "to", "relationType"}``. Each entity becomes a fact note named from
its name (:mod:`.names`; the name itself is kept as a keyword) whose content is the name, its type
and one ``- observation`` line each, tagged with its entity type. Each relation becomes a link from
its ``from`` note to its ``to`` note whose relation is the relation type; the link model keeps one
link per pair of notes, so several relation types between the same two entities are joined with
``,``. A relation naming an entity the file does not hold is reported, not refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .names import NameBook
from .plan import ImportPlan, NoteItem, ReadLimits, bad_input, read_text

__all__ = ["graph_record", "read_mcp_memory"]


def graph_record(line: str) -> dict[str, Any] | None:
    """Given one line, return it as an entity or relation object, or None when it is not one."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, dict) and value.get("type") in ("entity", "relation"):
        return value
    return None


def read_mcp_memory(path: Path, limits: ReadLimits) -> ImportPlan:
    """Given the server's JSONL file, return its plan (see the module docstring).

    Raises:
        InvalidPath: ``<file> line N: …`` for a line that is not JSON, not an entity or relation, or
            misses a field.
    """
    del limits  # an entity over the note cap is refused when the plan is checked, naming its line
    plan = ImportPlan(label="an MCP memory knowledge graph")
    entities: dict[str, NoteItem] = {}
    relations: list[tuple[str, str, str, str]] = []
    names = NameBook()
    for number, line in enumerate(read_text(path, path.name).split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path.name} line {number}"
        try:
            record = json.loads(line)
        except RecursionError:
            raise bad_input(where, "not JSON this command reads (nested too deeply)") from None
        except ValueError as err:
            raise bad_input(where, f"not JSON ({err})") from None
        if not isinstance(record, dict) or record.get("type") not in ("entity", "relation"):
            raise bad_input(where, 'not an entity or relation (each line is {"type": "entity"|"relation", …})')
        if record["type"] == "entity":
            _entity(record, where, entities, names, plan)
        else:
            fields = (_text(record, "from", where), _text(record, "to", where), _text(record, "relationType", where))
            relations.append((*fields, where))
    for source, target, relation, where in relations:
        start, end = entities.get(source), entities.get(target)
        if start is None or end is None:
            missing = source if start is None else target
            plan.unresolved.append(f"{source} -{relation}-> {target} ({where}: no entity {missing!r})")
            continue
        links = dict(start.links)
        if end.key in links and relation not in links[end.key].split(","):
            relation = f"{links[end.key]},{relation}"
        links[end.key] = relation
        start.links = list(links.items())
    for note in plan.notes:
        note.content = _content(note)
    return plan


def _entity(record: dict[str, Any], where: str, entities: dict[str, NoteItem], names: NameBook,
            plan: ImportPlan) -> None:  # fmt: skip
    name = _text(record, "name", where)
    kind = record.get("entityType")
    if kind is not None and not isinstance(kind, str):
        raise bad_input(where, "entityType must be a string")
    observations = record.get("observations", [])
    if not isinstance(observations, list) or any(not isinstance(o, str) for o in observations):
        raise bad_input(where, "observations must be a list of strings")
    note = entities.get(name)
    # observations gather in ``content`` one a line, and take their final shape once the file is read
    if note is None:  # a name met again adds its observations
        note = NoteItem(key=name, where=where, kind="fact", name=names.claim("fact", name), content="",
                        keywords=[name], tags=[kind] if kind and kind.strip() else [])  # fmt: skip
        entities[name] = note
        plan.notes.append(note)
    seen = note.content.split("\n") if note.content else []
    note.content = "\n".join(dict.fromkeys([*seen, *(o.strip() for o in observations if o.strip())]))


def _content(note: NoteItem) -> str:
    head = f"{note.key} ({note.tags[0]})" if note.tags else note.key
    body = "\n".join(f"- {line}" for line in note.content.split("\n") if line)
    return f"{head}\n{body}" if body else head


def _text(record: dict[str, Any], key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise bad_input(where, f"{key!r} must be a non-empty string")
    return value
