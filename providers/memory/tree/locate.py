"""The tree a space shows (docs/design.md, "The tree a space shows"), and where a normalised AFI path lands in it.

```
/.afi/manifest.json   /facts/<name>.md   /procedures/<name>.md   /files/<path>
/working/<block>.md   /episodes/<id>.md  /history/<id>.md  /sessions/<session-id>.md
```
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from afi.errors import InvalidPath

__all__ = ["AREAS", "MANIFEST_NAME", "NOTE_DIRS", "READ_ONLY_AREAS", "Node", "locate", "note_path"]

Area = Literal["root", "afi", "facts", "procedures", "files", "working", "episodes", "history", "sessions"]

# Top-level folders in path order (".afi" sorts first).
AREAS: tuple[str, ...] = (".afi", "episodes", "facts", "files", "history", "procedures", "sessions", "working")
NOTE_DIRS: dict[str, str] = {"facts": "fact", "procedures": "procedure", "working": "working"}
READ_ONLY_AREAS = frozenset({"afi", "episodes", "history", "sessions"})
MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True)
class Node:
    """A located path: its area, and within it the note name or the workspace-relative path."""

    path: str
    area: Area
    rest: str = ""  # "" for the area folder itself

    @property
    def is_area_root(self) -> bool:
        return self.rest == ""

    @property
    def kind(self) -> str | None:
        return NOTE_DIRS.get(self.area)

    @property
    def note_name(self) -> str:
        """The note name (or block label, or id) a ``<name>.md`` path names."""
        if "/" in self.rest:
            raise InvalidPath(f"/{self.area} is flat: notes cannot be nested in folders", path=self.path)
        if not self.rest.endswith(".md") or len(self.rest) <= 3:
            raise InvalidPath(f"notes in /{self.area} are named <name>.md", path=self.path)
        return self.rest[:-3]


def locate(path: str) -> Node | None:
    """Given a normalised path, return its node, or ``None`` when no area of the tree holds it."""
    if path == "/":
        return Node(path, "root")
    top, _, rest = path[1:].partition("/")
    area = "afi" if top == ".afi" else top
    if top not in AREAS:
        return None
    return Node(path, area, rest)  # type: ignore[arg-type]


def note_path(kind: str, name: str) -> str:
    """Given a note kind and its name (or block label), return its path in the tree."""
    folder = {"fact": "facts", "procedure": "procedures", "working": "working"}.get(kind, "history")
    return f"/{folder}/{name}.md"
