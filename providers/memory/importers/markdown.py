"""A Markdown folder or an Obsidian vault: every ``.md`` file a note, its links between the notes.

Files and folders whose name starts with ``.`` (``.obsidian/``, ``.trash/``, ``.git/``) are left
out silently; other files that are not ``.md`` (attachments), and symbolic or hard links (which may
be files outside the folder), are reported as skipped. A note is
named from its file name (:mod:`.names`); ``[[Target]]``, ``[[Target|alias]]``,
``[[Target#Heading]]`` and ``![[Target]]`` resolve as Obsidian resolves them: by path within the
vault, else by file name, case-insensitively (the shortest path wins a tie), and a relative
``[text](other.md)`` by its path. A link to no imported note is reported, not refused. A note
longer than the store's note cap is kept whole as a workspace file under ``/files/<folder>/``
(whose file note makes it recallable) and reported.
"""

from __future__ import annotations

import os
import posixpath
import stat
from pathlib import Path

from afi.errors import TooLarge

from ..workspace.quota import format_size
from .markup import parse_markup
from .names import NameBook
from .plan import LINKS_TO, FileItem, ImportPlan, NoteItem, ReadLimits, bad_input, read_text

__all__ = ["read_markdown", "read_obsidian"]

_SHOWN_SKIPS = 5
_ATTACHMENTS = frozenset(
    {".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".bmp", ".avif", ".pdf", ".mp3", ".wav", ".ogg", ".m4a",
     ".mp4", ".webm", ".mov", ".canvas", ".excalidraw"}
)  # fmt: skip


def read_obsidian(path: Path, limits: ReadLimits) -> ImportPlan:
    """Given an Obsidian vault folder, return its plan (see the module docstring)."""
    return _read(path, limits, "an Obsidian vault")


def read_markdown(path: Path, limits: ReadLimits) -> ImportPlan:
    """Given a folder of Markdown files (or one ``.md`` file), return its plan."""
    return _read(path, limits, "a Markdown folder" if path.is_dir() else "a Markdown file")


def _read(path: Path, limits: ReadLimits, label: str) -> ImportPlan:
    plan = ImportPlan(label=label)
    if path.is_dir():
        root, found = path, _walk(path, plan)
    elif path.suffix.lower() in (".md", ".markdown"):
        root, found = path.parent, [path.name]
    else:
        raise bad_input(path.name, "not a Markdown file (.md) or a folder of them")
    names = NameBook()
    by_path: dict[str, str] = {}  # lower-cased path without .md -> key
    pending: list[tuple[NoteItem, list[str], list[str]]] = []
    for rel in found:
        size = (root / rel).stat().st_size
        if size > limits.max_file_bytes:  # said before reading a file too large to keep even as a file
            raise TooLarge(f"{rel}: {format_size(size)}, over the workspace file cap of "
                           f"{format_size(limits.max_file_bytes)} (AFI_MAX_FILE_SIZE)")  # fmt: skip
        text = read_text(root / rel, rel)
        markup = parse_markup(text, rel)
        if not markup.body.strip():
            plan.skipped.append(f"{rel} (empty)")
            continue
        if len(markup.body) > limits.max_note_chars:
            plan.files.append(FileItem(rel, f"{_folder(root)}/{rel}", (root / rel).read_bytes()))
            plan.skipped.append(
                f"{rel} ({len(markup.body)} characters, over the {limits.max_note_chars}-character note cap: "
                f"kept as /files/{_folder(root)}/{rel})"
            )
            continue
        stem = posixpath.splitext(posixpath.basename(rel))[0]
        note = NoteItem(
            key=rel, where=rel, kind=markup.kind, name=names.claim(markup.kind, stem), content=markup.body,
            tags=markup.tags, keywords=markup.aliases, context=markup.context, valid_from=markup.valid_from,
        )  # fmt: skip
        by_path[posixpath.splitext(rel)[0].lower()] = rel
        plan.notes.append(note)
        pending.append((note, markup.wikilinks, markup.mdlinks))
    by_stem = _stems(by_path)
    for note, wikilinks, mdlinks in pending:
        targets: dict[str, None] = {}
        for written in wikilinks:
            found_key = _resolve_wikilink(written, by_path, by_stem)
            _add(plan, note, targets, found_key, f"[[{written}]]")
        for written in mdlinks:
            joined = posixpath.normpath(posixpath.join(posixpath.dirname(note.key), written))
            found_key = by_path.get(posixpath.splitext(joined)[0].lower())
            _add(plan, note, targets, found_key, f"({written})")
        note.links = [(key, LINKS_TO) for key in targets]
    return plan


def _walk(root: Path, plan: ImportPlan) -> list[str]:
    """The vault's ``.md`` files as sorted POSIX paths relative to ``root``; other files go to skipped."""
    found: list[str] = []
    others: list[str] = []
    links: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        base = Path(folder).relative_to(root).as_posix()
        links += sorted(f"{base}/{d}".removeprefix("./") for d in dirs if (Path(folder) / d).is_symlink())
        for name in files:
            if name.startswith("."):
                continue
            rel = name if base == "." else f"{base}/{name}"
            st = (Path(folder) / name).lstat()
            if stat.S_ISLNK(st.st_mode) or (stat.S_ISREG(st.st_mode) and st.st_nlink > 1):
                links.append(rel)  # it may be a file anywhere: only what the folder holds is read
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            (found if name.lower().endswith((".md", ".markdown")) else others).append(rel)
    if others:
        others.sort()
        more = len(others) - _SHOWN_SKIPS
        shown = ", ".join(others[:_SHOWN_SKIPS]) + (f", … ({more} more)" if more > 0 else "")
        plan.skipped.append(f"{len(others)} file(s) not Markdown: {shown}")
    if links:
        plan.skipped.append(
            f"{len(links)} symbolic or hard link(s), not followed: {', '.join(links[:_SHOWN_SKIPS])}"
            + (f", … ({len(links) - _SHOWN_SKIPS} more)" if len(links) > _SHOWN_SKIPS else "")
        )
    return sorted(found)


def _folder(root: Path) -> str:
    return root.resolve().name or "imported"


def _stems(by_path: dict[str, str]) -> dict[str, str]:
    """Lower-cased file name without .md -> key, the shortest path (then the first) winning a tie."""
    out: dict[str, str] = {}
    for lowered in sorted(by_path, key=lambda p: (p.count("/"), p)):
        out.setdefault(posixpath.basename(lowered), by_path[lowered])
    return out


def _resolve_wikilink(written: str, by_path: dict[str, str], by_stem: dict[str, str]) -> str | None:
    target = written.strip().strip("/")
    if target.lower().endswith(".md"):
        target = target[:-3]
    lowered = target.lower()
    return by_path.get(lowered) or by_stem.get(posixpath.basename(lowered))


def _add(plan: ImportPlan, note: NoteItem, targets: dict[str, None], key: str | None, shown: str) -> None:
    if key is None:
        if posixpath.splitext(shown.strip("[]()"))[1].lower() in _ATTACHMENTS:
            return  # an embedded attachment (![[diagram.png]]), not a note
        unresolved = f"{shown} in {note.where}"
        if unresolved not in plan.unresolved:
            plan.unresolved.append(unresolved)
    elif key != note.key:
        targets[key] = None
