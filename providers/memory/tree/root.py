"""``/``: the fixed top-level folders, and the table of the handler answering for each area."""

from __future__ import annotations

from typing import TYPE_CHECKING

from afi.model import Entry

from .afi import AfiArea
from .base import Area
from .entries import dir_entry
from .files import FilesArea
from .history import HistoryArea
from .ledger import EpisodesArea, SessionsArea
from .locate import AREAS
from .notes import NotesArea
from .working import WorkingArea

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["RootArea", "area_handlers"]


class RootArea(Area):
    """The root lists the top-level folders; nothing can be written there."""

    def children(self, space: Space) -> list[Entry]:
        at = space.clock.changed_at()
        return [dir_entry("/" + a, at) for a in AREAS]


def area_handlers(afi: AfiArea) -> dict[str, Area]:
    """One handler per area of :data:`~.locate.AREAS` (by :attr:`Node.area`), and the root's."""
    return {
        "root": RootArea(),
        "afi": afi,
        "episodes": EpisodesArea(),
        "facts": NotesArea("fact"),
        "files": FilesArea(),
        "history": HistoryArea(),
        "procedures": NotesArea("procedure"),
        "sessions": SessionsArea(),
        "working": WorkingArea(),
    }
