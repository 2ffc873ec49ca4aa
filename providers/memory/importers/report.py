"""What an import did, counted, and said in one line."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ImportReport"]

_SHOWN = 5


@dataclass
class ImportReport:
    """Counts of one import: notes new, changed (a new version) and unchanged; links; files written and
    unchanged; and what was skipped or left unresolved, each with why."""

    format: str
    label: str
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    links: int = 0
    files_written: int = 0
    files_unchanged: int = 0
    skipped: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)

    @property
    def notes(self) -> int:
        return self.created + self.updated + self.unchanged

    @property
    def files(self) -> int:
        return self.files_written + self.files_unchanged

    def summary(self) -> str:
        """E.g. ``imported 12 notes (3 links) from an Obsidian vault: 10 new, 2 unchanged; 2 skipped: …``."""
        parts: list[str] = []
        if self.notes or not self.files:
            parts.append(f"{_count(self.notes, 'note')} ({_count(self.links, 'link')})")
        if self.files:
            parts.append(_count(self.files, "file"))
        line = f"imported {' and '.join(parts)} from {self.label}"
        detail = [f"{n} {what}" for n, what in ((self.created, "new"), (self.updated, "updated"),
                                                  (self.unchanged, "unchanged")) if n]  # fmt: skip
        if self.files_unchanged:
            detail.append(f"{_count(self.files_unchanged, 'file')} unchanged")
        if detail and (len(detail) > 1 or not detail[0].endswith("new")):
            line += ": " + ", ".join(detail)
        if self.skipped:
            line += f"; skipped: {_listed(self.skipped)}"
        if self.unresolved:
            line += f"; {_count(len(self.unresolved), 'link')} to nothing imported: {_listed(self.unresolved)}"
        return line


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _listed(items: list[str]) -> str:
    shown = "; ".join(items[:_SHOWN])
    return shown + (f"; … ({len(items) - _SHOWN} more)" if len(items) > _SHOWN else "")
