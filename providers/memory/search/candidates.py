"""Grep's candidates in one space: the documents of a scope that may match, and the cache that keeps them.

The indexed part (notes and workspace files, possibly many) comes from the trigram indexes and is
cached per (space, literals, scope), checked against the stores' change counters, so following a
cursor costs one page of work; the small unindexed part (working blocks, the manifest, the ledger's
views) is listed afresh each time. Workspace files whose text the index does not hold (over 1 MiB,
binary, not UTF-8) are candidates of every query, and are read from disk a piece at a time.
"""

from __future__ import annotations

import contextlib
import heapq
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from afi.paths import is_within

from ..fabric.render import render_note
from ..ledger.conversation import episode_note
from ..tree.at import AT_FILES, AT_ROOT, parse_at
from ..tree.at_files import at_file_candidates, at_file_texts
from ..tree.at_ledger import AT_LEDGER_AREAS, ledger_list_at, ledger_text_at
from ..tree.history_files import FILES_DIR, history_file_candidates
from ..tree.ledger import ledger_text
from ..tree.locate import MANIFEST_NAME, note_path
from .grep import Candidate, Text
from .scan import Doc, FileDoc

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["GREP_CACHE_CANDIDATES", "GREP_CACHE_SIZE", "CandidateCache", "candidates", "load_texts"]

GREP_CACHE_SIZE = 32
GREP_CACHE_CANDIDATES = 400_000  # candidates kept across cached queries (~60 MB); the newest list always stays

Key = tuple[str, tuple[str, ...], str]  # (space, literals, scope)
Token = tuple[int, int]  # (notes' change seq, workspace's change seq)


class CandidateCache:
    """The newest candidate lists, at most :data:`GREP_CACHE_SIZE` of them and :data:`GREP_CACHE_CANDIDATES`
    candidates in all (the newest list always stays), each valid while its change token is current."""

    def __init__(self) -> None:
        self._lists: OrderedDict[Key, tuple[Token, list[Candidate]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Key, token: Token, load: Callable[[], list[Candidate]]) -> list[Candidate]:
        """The candidates of ``key`` read at ``token``: cached ones, or ``load()``'s, then kept."""
        with self._lock:
            cached = self._lists.get(key)
            if cached is not None and cached[0] == token:
                self._lists.move_to_end(key)
                return cached[1]
        found = load()
        with self._lock:
            self._lists[key] = (token, found)
            self._lists.move_to_end(key)
            held = sum(len(entry[1]) for entry in self._lists.values())
            while len(self._lists) > 1 and (len(self._lists) > GREP_CACHE_SIZE or held > GREP_CACHE_CANDIDATES):
                _, evicted = self._lists.popitem(last=False)
                held -= len(evicted[1])
        return found

    def sizes(self) -> list[int]:
        """How many candidates each cached list holds, oldest first."""
        with self._lock:
            return [len(entry[1]) for entry in self._lists.values()]


def candidates(
    cache: CandidateCache, name: str, space: Space, literals: list[str], scope: str, manifest: Callable[[], bytes]
) -> list[Candidate]:
    """Every document of the scope that may match, sorted by path."""
    token = (space.notes.change_token(), space.workspace.change_token())
    indexed = cache.get((name, tuple(literals), scope), token, lambda: _indexed(space, literals, scope))
    fresh = sorted(c for c in _unindexed(space, scope, manifest) if is_within(c[0], scope))
    return list(heapq.merge(indexed, fresh)) if fresh else indexed


def _indexed(space: Space, literals: list[str], scope: str) -> list[Candidate]:
    if is_within(scope, AT_ROOT):
        return sorted(c for c in _at_indexed(space, literals, scope) if is_within(c[0], scope))
    found: list[Candidate] = []
    # Current content once, at its folder's path; every version under /history only when the scope is
    # there (as a file server keeps its snapshot folders out of a recursive walk)
    history = is_within(scope, "/history")
    if history or _overlaps(scope, "/facts") or _overlaps(scope, "/procedures"):
        for rowid, id_, kind, name, valid in space.notes.grep_candidates(literals, versions=history):
            if history:
                found.append((f"/history/{id_}.md", "reading", (rowid, None)))
            elif valid and name and kind in ("fact", "procedure"):
                found.append((note_path(kind, name), "note", rowid))
    if _overlaps(scope, "/files"):
        unindexed = space.workspace.unindexed()
        skipped = {rowid for rowid, _ in unindexed}
        found.extend(
            (f"/files/{rel}", "file", rowid)
            for rowid, rel in space.workspace.candidates(literals[0] if literals else None)
            if rowid not in skipped
        )
        found.extend((f"/files/{rel}", "disk", rel) for _, rel in unindexed)
    return sorted(c for c in found if is_within(c[0], scope))


def _at_indexed(space: Space, literals: list[str], scope: str) -> Iterator[Candidate]:
    """The notes of an instant's tree (``/.afi/at/<instant>``) that may match: as the current tree's,
    with validity and writing judged at the instant."""
    where = parse_at(scope, space)
    if where is None or not where.segment:
        return
    history = where.area == "history"
    for rowid, id_, kind, name, valid in space.notes.grep_candidates(literals, where.at, versions=history):
        if history:
            yield f"{where.base}/history/{id_}.md", "reading", (rowid, where.at)
        elif valid and name and kind in ("fact", "procedure"):
            yield f"{where.base}/{'facts' if kind == 'fact' else 'procedures'}/{name}.md", "reading", (rowid, where.at)


def _unindexed(space: Space, scope: str, manifest: Callable[[], bytes]) -> Iterator[Candidate]:
    """The small unindexed documents of the areas the scope reaches."""
    yield from _file_versions(space, scope)
    yield from _ledger_at(space, scope)
    if _overlaps(scope, "/working"):
        for label, note in space.fabric.blocks().items():
            yield f"/working/{label}.md", "text", render_note(note)
    if _overlaps(scope, "/.afi"):
        yield f"/.afi/{MANIFEST_NAME}", "text", manifest().decode()
    if _overlaps(scope, "/episodes"):
        for obs in space.ledger.observations():
            yield f"/episodes/{obs.id}.md", "text", render_note(episode_note(obs, space.fabric.memory.scope))
    if _overlaps(scope, "/sessions"):
        for sid in space.ledger.sessions():
            yield f"/sessions/{sid}.md", "session", sid


def _file_versions(space: Space, scope: str) -> Iterator[Candidate]:
    """Kept file versions, unindexed (no index covers past bytes; each is read when a page reaches
    it): under ``/history/files`` when the scope is within ``/history``, and an instant's files
    when it is within ``/.afi/at/<instant>``."""
    if is_within(scope, "/history") and _overlaps(scope, FILES_DIR):
        yield from history_file_candidates(space)
    elif is_within(scope, AT_ROOT):
        where = parse_at(scope, space)
        if where is not None and where.segment and where.area in ("", AT_FILES):
            yield from at_file_candidates(space, where.at, f"{where.base}/{AT_FILES}")


def _ledger_at(space: Space, scope: str) -> Iterator[Candidate]:
    """An instant's sessions and episodes (the ledger up to then), when the scope reaches them."""
    if not is_within(scope, AT_ROOT):
        return
    where = parse_at(scope, space)
    if where is None or not where.segment:
        return
    for area in AT_LEDGER_AREAS:
        if where.area in ("", area):
            folder = f"{where.base}/{area}"
            for entry in ledger_list_at(space, where.at, area, folder):
                name = entry.path.rsplit("/", 1)[-1]
                yield entry.path, "text", ledger_text_at(space, where.at, area, name, entry.path)[1]


def load_texts(space: Space, batch: list[Candidate]) -> list[Text | None]:
    """The documents of a batch of candidates, in order (``None`` for one that vanished meanwhile): texts,
    and files read from disk (opened when a page reaches them)."""
    notes = space.notes.rendered_by_rowid([key for _, source, key in batch if source == "note"])
    files = space.workspace.texts_by_rowid([key for _, source, key in batch if source == "file"])
    versions = at_file_texts(space, [key for _, source, key in batch if source == "version"])
    readings: dict[tuple[int, str | None], str] = {}
    for at in {key[1] for _, source, key in batch if source == "reading"}:
        rowids = [key[0] for _, source, key in batch if source == "reading" and key[1] == at]
        readings.update({(rowid, at): text for rowid, text in space.notes.read_by_rowid(rowids, at).items()})
    texts: list[Text | None] = []
    for path, source, key in batch:
        if source == "note":
            texts.append(notes.get(key))
        elif source == "reading":
            texts.append(readings.get(key))
        elif source == "file":
            texts.append(files.get(key))
        elif source == "disk":
            texts.append(_disk(space, str(key)))
        elif source == "version":
            texts.append(versions.get(key))
        elif source == "session":
            texts.append(ledger_text(space.ledger, space.fabric.memory.scope, path)[1])
        else:
            texts.append(str(key))
    return texts


def _disk(space: Space, rel: str) -> Callable[[], contextlib.AbstractContextManager[Doc | None]]:
    """A workspace file, opened when grep reaches it (None then if it is gone or never read)."""

    @contextlib.contextmanager
    def opener() -> Iterator[Doc | None]:
        with space.workspace.opened(rel) as opened:
            yield None if opened is None else FileDoc(opened.fd, opened.size)

    return opener


def _overlaps(scope: str, area: str) -> bool:
    """True when a search scope and a folder share paths (one lies within the other)."""
    return is_within(scope, area) or is_within(area, scope)
