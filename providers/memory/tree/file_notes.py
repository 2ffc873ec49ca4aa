"""Keeping ``/files``' notes true to the files: one note per text file a person would recall, none for
the rest, and none left behind by an overwrite, a move or a delete.

A write remembers the file's text as its ``file`` note unless the path is ignored or the file is
binary or empty (:mod:`..workspace.ignore`); then the notes recorded against the path are retired
instead, so a file that turned binary stops answering recall. A move first retires the notes of any
file it overwrites, then repoints the moved files' notes; one that lands on an ignored path is
retired, and one that leaves an ignored path is remembered from its bytes. A delete retires the
notes of every file it removed. Changing ``.afiignore`` retires the notes of the paths it now ignores.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from afi.errors import AfiError

from ..fabric.repoint import create_fabric_repoint_handler, repoint_source
from ..workspace.ignore import AFIIGNORE, AFIIGNORE_MAX_BYTES, IgnoreRules, note_text

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["file_written", "files_deleted", "files_moved", "ignore_rules"]

_HEAD_BYTES_PER_CHAR = 4  # a note's text is at most ``cap`` characters: 4 bytes each in UTF-8 at most


def ignore_rules(space: Space) -> IgnoreRules:
    """The space's rules, made once per open space (its ``.afiignore`` is re-read when it changes)."""
    rules: IgnoreRules | None = getattr(space.workspace, "ignore_rules", None)
    if rules is None:
        rules = IgnoreRules(lambda: _head(space, AFIIGNORE, AFIIGNORE_MAX_BYTES))
        space.workspace.ignore_rules = rules  # type: ignore[attr-defined]
    return rules


def _head(space: Space, rel: str, size: int) -> bytes | None:
    try:
        data, _ = space.workspace.read(rel, f"/files/{rel}", 0, size)
    except AfiError:  # gone, a folder, or refused by the jail: no text to take
        return None
    return data


def _text(space: Space, rel: str, full: bytes | None) -> str | None:
    """The text the file at ``rel`` gives its note, or None when it is to have none."""
    if ignore_rules(space).ignored(rel):
        return None
    cap = space.fabric.memory.limits.max_entry_text_chars
    data = full if full is not None else _head(space, rel, cap * _HEAD_BYTES_PER_CHAR)
    return None if data is None else note_text(data, cap)


def _retire(space: Space, rels: Sequence[str]) -> int:
    if not rels:
        return 0
    memory = space.fabric.memory
    return create_fabric_repoint_handler(memory).delete(list(rels), scope=memory.scope, reason="forgotten")


def _retire_newly_ignored(space: Space) -> None:
    memory = space.fabric.memory
    rules = ignore_rules(space)
    paths = {note.path for note in memory.store.select_notes(memory.scope, "kind = 'file' AND status = 'active'")}
    _retire(space, sorted(p for p in paths if p and rules.ignored(p)))


def file_written(space: Space, rel: str, full: bytes | None) -> None:
    """After a write of ``rel`` (``full``: its bytes when the index read them), bring its note in line."""
    text = _text(space, rel, full)
    with space.fabric.memory.store.write(space.fabric.memory.scope):
        if text is None:
            _retire(space, [rel])
        else:
            space.fabric.remember(kind="file", path=rel, content=text)
        if rel == AFIIGNORE:
            _retire_newly_ignored(space)


def files_deleted(space: Space, rels: Sequence[str]) -> None:
    """After a delete, retire the notes of every file it removed."""
    _retire(space, rels)


def files_moved(space: Space, moved: Sequence[tuple[str, str]], overwritten: Sequence[str]) -> None:
    """After a move (``moved``: old and new paths of every file; ``overwritten``: the files it replaced)."""
    memory = space.fabric.memory
    rules = ignore_rules(space)
    handler = create_fabric_repoint_handler(memory)
    with memory.store.write(memory.scope):
        _retire(space, overwritten)
        for old, new in moved:
            if rules.ignored(new):
                _retire(space, [old])
            elif rules.ignored(old) or not repoint_source(memory, old, new, handlers=[handler]):
                text = _text(space, new, None)
                if text is not None:
                    space.fabric.remember(kind="file", path=new, content=text)
        if AFIIGNORE in {old for old, _ in moved} | {new for _, new in moved}:
            _retire_newly_ignored(space)
