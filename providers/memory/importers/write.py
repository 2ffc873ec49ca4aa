"""Checking a plan against the store's rules, then writing it through the provider's verbs.

Every note is checked as ``remember`` would check it, and every file's path and size as the
workspace would, before the first write: a source that would fail half-way fails before it
starts, naming the record. The writes are the provider's own (``remember_many`` for the notes, a
batch at a time, ``write`` for the files), each locked and audited, so indexes, versions and file
notes stay what any other door would leave; they all go in one transaction (the provider's
``import_whole``), each file recorded in its journal first, so the import is whole or not at all.

Importing the same source again changes nothing: a note is written by name with consolidation on,
so the same name with the same text folds into the note already there (same id, tags and links
unioned), and a changed text becomes a new version of it (valid from now; the old one stays in
``/history``). A file whose bytes are already there is not written again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from afi.errors import AfiError, InvalidPath, NotFound, TooLarge
from afi.paths import normalize
from afi.provider import Caller

from ..fabric.batch import MAX_BATCH_BYTES, MAX_BATCH_NOTES, item_bytes
from ..fabric.fields import validate_fields
from ..fabric.lexical import normalize_note_text
from ..fabric.store import iso_now
from ..journal import FileJournal
from ..provider import MemoryProvider
from ..workspace.quota import format_size
from ..workspace.workspace import is_reserved
from .plan import FileItem, ImportPlan, NoteItem
from .report import ImportReport

__all__ = ["check_plan", "write_plan"]

Progress = Callable[[int, int], None]


def check_plan(provider: MemoryProvider, space: str, plan: ImportPlan) -> None:
    """Refuse the plan unless every note and file in it would be accepted.

    Raises:
        InvalidPath, TooLarge: naming the record (``notes/a.md: content has … characters; the cap is …``).
    """
    memory = provider.fabric(space).memory
    now = iso_now()
    for note in plan.notes:
        if note.valid_from is not None and note.valid_from > now:
            note.valid_from = None  # a note path holds the version valid now: a future date would hide it
        try:
            validate_fields(memory, note.kind, now, **_fields(note))
        except AfiError as err:
            raise type(err)(f"{note.where}: {err.message}") from None
    cap = provider.workspace_limits.max_file_bytes
    for item in plan.files:
        try:
            normalize(f"/files/{item.rel}")
        except AfiError as err:
            raise InvalidPath(f"{item.where}: cannot be a workspace path: {err.message}") from None
        if is_reserved(item.rel):
            raise InvalidPath(f"{item.where}: its name is reserved for the workspace's temporary files")
        if len(item.data) > cap:
            raise TooLarge(f"{item.where}: {format_size(len(item.data))}, over the workspace file cap of "
                           f"{format_size(cap)} (AFI_MAX_FILE_SIZE)")  # fmt: skip


def write_plan(provider: MemoryProvider, caller: Caller, plan: ImportPlan, report: ImportReport,
               progress: Progress | None, journal: FileJournal | None) -> None:  # fmt: skip
    """Write a checked plan's notes, then the links that point forward, then its files (each recorded in
    ``journal`` first), counting into ``report``; ``progress(done, total)`` after each batch of notes
    (:func:`~..fabric.batch.remember_many`: as many as a batch holds) and each other write. A note
    whose links all point to notes already written gets them with its first write; the others get them
    in a second, folding one."""
    ids: dict[str, str] = {}
    later = _forward(plan.notes)
    total = len(plan.notes) + len(later) + len(plan.files)
    tick = progress or (lambda _done, _total: None)
    tick(0, total)
    done = 0
    batch: list[tuple[NoteItem, dict[str, Any]]] = []
    keys: set[str] = set()
    names: set[tuple[str, str]] = set()
    size = 0

    def flush() -> None:
        nonlocal done, size
        if batch:
            _remember_batch(provider, caller, batch, ids, report)
            done += len(batch)
            tick(done, total)
            batch.clear()
            keys.clear()
            names.clear()
            size = 0

    for note in plan.notes:
        # a note linking to one of this batch, or taking a name it holds, waits for the batch to be written
        if any(key in keys for key, _ in note.links) or (note.kind, note.name) in names:
            flush()
        fields = {**_fields(note), "links": None if note.key in later else _links(note, ids)}
        bytes_ = item_bytes({"kind": note.kind, "consolidate": True, **fields})
        if len(batch) == MAX_BATCH_NOTES or size + bytes_ > MAX_BATCH_BYTES:
            flush()
        batch.append((note, fields))
        keys.add(note.key)
        names.add((note.kind, note.name))
        size += bytes_
    flush()
    for note in plan.notes:
        if note.key in later:
            provider.remember(caller, kind=note.kind, name=note.name, content=note.content,
                              links=_links(note, ids), consolidate=True)  # fmt: skip
            done += 1
            tick(done, total)
    for item in plan.files:
        _write_file(provider, caller, item, report, journal)
        done += 1
        tick(done, total)
    report.links = sum(len(note.links) for note in plan.notes)


def _forward(notes: list[NoteItem]) -> set[str]:
    """The keys of the notes that link to a note written after them (so not yet known by id)."""
    seen: set[str] = set()
    out: set[str] = set()
    for note in notes:
        if any(key not in seen for key, _ in note.links):
            out.add(note.key)
        seen.add(note.key)
    return out


def _links(note: NoteItem, ids: dict[str, str]) -> list[dict[str, str]] | None:
    return [{"id": ids[key], "relation": relation} for key, relation in note.links] or None


def _fields(note: NoteItem) -> dict[str, Any]:
    return {
        "content": note.content, "name": note.name, "tags": note.tags or None, "keywords": note.keywords or None,
        "context": note.context, "valid_from": note.valid_from,
    }  # fmt: skip


def _remember_batch(provider: MemoryProvider, caller: Caller, batch: list[tuple[NoteItem, dict[str, Any]]],
                    ids: dict[str, str], report: ImportReport) -> None:  # fmt: skip
    """Remember a batch of notes by name (no two of one name, none linking to another of the batch) in one
    call, folding; record the id of the note that now stands for each in ``ids``."""
    fabric = provider.fabric(caller.space)
    befores = [fabric.find(note.kind, note.name) for note, _ in batch]
    items: list[dict[str, Any]] = []
    for (note, fields), before in zip(batch, befores, strict=True):
        same = before is not None and normalize_note_text(before.content) == normalize_note_text(note.content)
        if before is not None and not same:
            fields = {**fields, "valid_from": None}  # the new version holds from now; the old one until now
        items.append({"kind": note.kind, "consolidate": True, **fields})
    written = provider.remember_many(caller, items)
    for (note, _), before, stored in zip(batch, befores, written, strict=True):
        if before is None:
            report.created += 1
        elif stored.id == before.id:
            report.unchanged += 1
        else:
            report.updated += 1
        ids[note.key] = stored.id


def _write_file(provider: MemoryProvider, caller: Caller, item: FileItem, report: ImportReport,
                journal: FileJournal | None) -> None:  # fmt: skip
    path = f"/files/{item.rel}"
    try:
        same = provider.stat(caller, path).size == len(item.data) and provider.read(caller, path).data == item.data
    except NotFound:
        same = False
    if same:
        report.files_unchanged += 1
        return
    assert journal is not None, "a plan with files is written with a journal"
    journal.before_write(item.rel, item.data)
    provider.write(caller, path, item.data)
    report.files_written += 1
