"""The memory provider: the AFI verbs over the tree of a space (docs/design.md, "The tree a space shows").

Notes are the fabric's: writing ``/facts/x.md`` is ``remember(kind="fact", name="x")``, deleting is
``forget``. ``/files`` is the jailed workspace of real files, each with a ``file`` note. Every write
verb is recorded in the ``audit`` table, refused or not.
"""

from __future__ import annotations

import builtins
import heapq
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from afi.auth.audit import AUDIT_SCHEMA, AuditLog
from afi.errors import AfiError, Conflict, Forbidden, Internal, InvalidPath, NotFound, Unauthorized, Unsupported
from afi.manifest import build_manifest
from afi.model import (
    ConversationQuery,
    DeleteResult,
    Entry,
    Manifest,
    MatchPage,
    Page,
    ReadResult,
    SearchRequest,
    SemanticQuery,
    query_mode,
)
from afi.paths import is_within, normalize
from afi.provider import Caller
from afi.regex import compile_glob
from afi.sqlite import Connections

from .conversation import (
    episode_note,
    episode_recall,
)
from .cursor import decode_cursor, encode_cursor
from .embedders import Embedder
from .entries import EPOCH, block_entry, dir_entry, file_entry, manifest_entry, row_entry
from .fabric import MemoryFabric, create_memory_fabric
from .ledger import Ledger, apply_op
from .ledger_views import conversation_matches, ledger_text
from .locks import SpaceLocks, lock_folder
from .memory import space_memory
from .notes_view import NotesView, rendered_etag
from .render import parse_note, render_note
from .search import Candidate, GrepSource, grep, hit_path, semantic_matches
from .tree import AREAS, MANIFEST_NAME, READ_ONLY_AREAS, Node, locate, note_path
from .types import ForgetResult, MemoryNote
from .workspace import Workspace, WorkspaceLimits

__all__ = ["MemoryProvider"]

PROVIDER_NAME = "afi-memory"
PROVIDER_VERSION = "0.1.0"
MAX_LIST = 1000
MAX_RESULTS = 1000
SPACE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
GREP_CACHE_SIZE = 32
GREP_CACHE_CANDIDATES = 400_000  # candidates kept across cached queries (~60 MB); the newest list always stays
# Semantic search ranks by the fused relevance, then lets recency and importance nudge it
# (docs/memory-fabric.md, "Recall and scoring").
SEARCH_SCORING = {"recency_weight": 0.1, "importance_weight": 0.1, "half_life_ms": 30 * 86_400_000}


T = TypeVar("T")


class _Space:
    """What one space holds open: its fabric, the notes view, the workspace and the ledger."""

    def __init__(self, fabric: MemoryFabric, notes: NotesView, workspace: Workspace, ledger: Ledger) -> None:
        self.fabric = fabric
        self.notes = notes
        self.workspace = workspace
        self.ledger = ledger


class MemoryProvider:
    """An AFI provider at profile 3 over the memory fabric and a jailed workspace per space."""

    def __init__(
        self,
        db: str | Path,
        root: str | Path,
        *,
        keys: Any = None,
        embedder: Embedder | None = None,
        manifest_extra: dict[str, Any] | None = None,
        workspace_limits: WorkspaceLimits | None = None,
    ) -> None:
        if str(db) == ":memory:":
            raise ValueError("MemoryProvider needs a database file: every worker thread opens its own connection")
        self.db = Path(db)
        self.root = Path(root).expanduser()
        self.root.mkdir(parents=True, exist_ok=True)
        self._embedder = embedder
        self.workspace_limits = workspace_limits or WorkspaceLimits.from_env()
        self._db = Connections(self.db, schema=AUDIT_SCHEMA + _workspace_schema())
        self.audit = AuditLog(self._db)
        self._keys = keys if keys is not None else _default_keys(self.db)
        self._spaces: dict[str, _Space] = {}
        self._lock = threading.Lock()
        self._write_locks = SpaceLocks(lock_folder(self.db))
        self._grep_cache: OrderedDict[tuple[str, tuple[str, ...], str], tuple[tuple[int, int], list[Candidate]]] = (
            OrderedDict()
        )
        self._manifest_extra = dict(manifest_extra or {})
        self._manifests: dict[bool, tuple[Manifest, bytes]] = {}  # by whether keys exist

    # -- discovery & auth ------------------------------------------------------------------

    def manifest(self) -> Manifest:
        """The manifest; ``auth.required`` follows keys created while serving (the only part that changes)."""
        return self._manifest_and_body()[0]

    def _manifest_and_body(self) -> tuple[Manifest, bytes]:
        required = self._keys is not None and self._keys.count() > 0
        cached = self._manifests.get(required)
        if cached is None:
            manifest = self._build_manifest(required)
            body = (json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n").encode()
            cached = self._manifests[required] = (manifest, body)
        return cached

    def _build_manifest(self, auth_required: bool) -> Manifest:
        embedder = self._space("default").fabric.memory.embedder
        return build_manifest(
            provider=PROVIDER_NAME,
            provider_version=PROVIDER_VERSION,
            capabilities=["stat", "list", "read", "search", "write", "mkdir", "delete", "move"],
            search_modes=["exact", "regex", "semantic"],
            max_results=MAX_RESULTS,
            auth_required=auth_required,
            auth_methods=["bearer"],
            extra={
                "x-note-kinds": ["fact", "procedure", "file", "working", "episode"],
                "x-search-modes": ["x-conversation"],
                "x-embedder": {"name": embedder.name, "dims": embedder.dims},
                "x-limits": {
                    "list_max": MAX_LIST,
                    "search_max_results": MAX_RESULTS,
                    "file_max_bytes": self.workspace_limits.max_file_bytes,
                },
                **self._manifest_extra,
            },
        )

    def authenticate(self, token: str | None) -> Caller:
        if self._keys is None:
            if token:
                raise Unauthorized("this server has no API keys; send no token (or create one: afi token create)")
            return Caller(principal="local", space="default")
        return self._keys.authenticate(token)  # type: ignore[no-any-return]

    # -- spaces ----------------------------------------------------------------------------

    def fabric(self, space: str) -> MemoryFabric:
        """The memory fabric of a space (for bindings that hand its governed tools to a session)."""
        return self._space(space).fabric

    def _space(self, name: str) -> _Space:
        found = self._spaces.get(name)
        if found is not None:
            return found
        _check_space_name(name)
        with self._write_locks.hold(name):  # no writer is mid-way, so a temporary file found now is an orphan
            found = self._open_space(name)
            found.workspace.sweep_temporary_files()
        return found

    def _open_space(self, name: str) -> _Space:
        with self._lock:
            found = self._spaces.get(name)
            if found is None:
                memory = space_memory(self.db, name, embedder=self._embedder)
                fabric = create_memory_fabric(memory)
                found = _Space(
                    fabric,
                    NotesView(self._db, memory.scope),
                    Workspace(self.root, name, self._db, self.workspace_limits),
                    Ledger(self.db, space=name),
                )
                self._spaces[name] = found
        return found

    # -- read verbs ------------------------------------------------------------------------

    def stat(self, caller: Caller, path: str) -> Entry:
        caller.require("afi:read")
        path = normalize(path)
        node = self._locate(path)
        space = self._space(caller.space)
        if node.area == "root" or node.is_area_root:
            return dir_entry(path)
        if node.area == "afi":
            if node.rest != MANIFEST_NAME:
                raise NotFound("no such file", path=path)
            return manifest_entry(self._manifest_bytes())
        if node.area == "files":
            return file_entry(path, space.workspace.stat(node.rest, path))
        return self._note_entry(space, node)

    def list(
        self, caller: Caller, path: str, *, limit: int = MAX_LIST, cursor: str | None = None, glob: str | None = None
    ) -> Page:
        caller.require("afi:read")
        path = normalize(path)
        limit = _check_limit(limit, MAX_LIST)
        name_matches = compile_glob(glob) if glob else None  # refuses an overlong glob before SQLite sees it
        node = self._locate(path)
        position = decode_cursor("list", cursor)
        after = None if position is None else str(position["a"])
        space = self._space(caller.space)
        if node.area == "root":
            entries = [dir_entry("/" + a) for a in AREAS]
        elif node.area == "afi" and node.is_area_root:
            entries = [manifest_entry(self._manifest_bytes())]
        elif node.area == "files":
            entries = [file_entry(f"{path}/{c.name}", c) for c in space.workspace.listdir(node.rest, path)]
        elif node.area == "working" and node.is_area_root:
            entries = [block_entry(label, note) for label, note in sorted(space.fabric.blocks().items())]
        elif node.area in ("facts", "procedures") and node.is_area_root:
            rows = space.notes.list_current(node.kind or "", after=after, glob=_sql_glob(glob), limit=limit + 1)
            return _page([row_entry(note_path(r.kind, r.name or r.id), r) for r in rows], limit)
        elif node.area == "history" and node.is_area_root:
            rows = space.notes.list_history(after=after, glob=_sql_glob(glob), limit=limit + 1)
            return _page([row_entry(f"/history/{r.id}.md", r, writable=False) for r in rows], limit)
        elif node.area == "episodes" and node.is_area_root:
            entries = [
                ledger_text(space.ledger, space.fabric.memory.scope, f"/episodes/{o.id}.md")[0]
                for o in space.ledger.observations()
            ]
        elif node.area == "sessions" and node.is_area_root:
            entries = [
                ledger_text(space.ledger, space.fabric.memory.scope, f"/sessions/{sid}.md")[0]
                for sid in space.ledger.sessions()
            ]
        else:
            self.stat(caller, path)  # not_found when absent
            raise InvalidPath("this is a file, not a folder: read it instead of listing it", path=path)
        if name_matches is not None:
            entries = [e for e in entries if name_matches(e.path.rsplit("/", 1)[-1])]
        if after is not None:
            entries = [e for e in entries if e.path.rsplit("/", 1)[-1] > after]
        return _page(entries[: limit + 1], limit)

    def read(self, caller: Caller, path: str, *, offset: int = 0, length: int | None = None) -> ReadResult:
        caller.require("afi:read")
        path = normalize(path)
        if offset < 0 or (length is not None and length < 0):
            raise InvalidPath("offset and length must not be negative", path=path)
        node = self._locate(path)
        space = self._space(caller.space)
        if node.area == "root" or node.is_area_root:
            raise InvalidPath("this is a folder: list it instead of reading it", path=path)
        if node.area == "files":
            data, info = space.workspace.read(node.rest, path, offset, length)
            entry = file_entry(path, info)
            return ReadResult(
                data=data,
                content_type=entry.content_type,
                eof=offset + len(data) >= info.size,
                size=info.size,
                etag=entry.etag,
                mtime=entry.mtime,
            )
        if node.area == "afi":
            if node.rest != MANIFEST_NAME:
                raise NotFound("no such file", path=path)
            whole = self._manifest_bytes()
            etag: str | None = rendered_etag(whole.decode())
            content_type, mtime = "application/json", EPOCH
        else:
            entry, text = self._note_text(space, node)
            whole, content_type, etag, mtime = text.encode(), entry.content_type, entry.etag, str(entry.mtime)
        end = len(whole) if length is None else min(len(whole), offset + length)
        data = whole[offset:end] if offset < len(whole) else b""
        return ReadResult(
            data=data, content_type=content_type, eof=end >= len(whole), size=len(whole), etag=etag, mtime=mtime
        )

    def search(self, caller: Caller, request: SearchRequest) -> MatchPage:
        caller.require("afi:read")
        scope = normalize(request.path)
        limit = _check_limit(request.limit, MAX_RESULTS)
        space = self._space(caller.space)
        if isinstance(request.query, ConversationQuery):
            return conversation_matches(space.ledger, request.query, min(limit, 100))
        if query_mode(request.query) == "semantic":
            return self._semantic(space, request, scope, limit)
        if is_within(scope, "/files") or scope == "/":
            space.workspace.refresh()
        source = GrepSource(
            candidates=lambda lits: self._grep_candidates(caller.space, space, lits, scope),
            load=lambda batch: self._load_texts(space, batch),
        )
        return grep(source, request, scope, limit)

    def _grep_candidates(
        self, name: str, space: _Space, literals: builtins.list[str], scope: str
    ) -> builtins.list[Candidate]:
        """Every document of the scope that may match, sorted by path.

        The indexed part (notes and workspace files, possibly many) is cached per query and scope and
        checked against the stores' change counters, so following a cursor costs one page of work; the
        small unindexed part (working blocks, the manifest, the ledger's views) is listed afresh.
        """
        token = (space.notes.change_token(), space.workspace.change_token())
        key = (name, tuple(literals), scope)
        with self._lock:
            cached = self._grep_cache.get(key)
            if cached is not None and cached[0] == token:
                self._grep_cache.move_to_end(key)
        if cached is None or cached[0] != token:
            cached = (token, self._indexed_candidates(space, literals, scope))
            with self._lock:
                self._grep_cache[key] = cached
                held = sum(len(entry[1]) for entry in self._grep_cache.values())
                while len(self._grep_cache) > 1 and (
                    len(self._grep_cache) > GREP_CACHE_SIZE or held > GREP_CACHE_CANDIDATES
                ):
                    _, evicted = self._grep_cache.popitem(last=False)
                    held -= len(evicted[1])
        fresh = sorted(c for c in self._unindexed_candidates(space, scope) if is_within(c[0], scope))
        return list(heapq.merge(cached[1], fresh)) if fresh else cached[1]

    def _indexed_candidates(self, space: _Space, literals: builtins.list[str], scope: str) -> builtins.list[Candidate]:
        found: builtins.list[Candidate] = []
        if any(_overlaps(scope, area) for area in ("/facts", "/procedures", "/history")):
            for rowid, id_, kind, name, valid in space.notes.grep_candidates(literals):
                found.append((f"/history/{id_}.md", "note", rowid))
                if valid and name and kind in ("fact", "procedure"):
                    found.append((note_path(kind, name), "note", rowid))
        if _overlaps(scope, "/files"):
            found.extend(
                (f"/files/{rel}", "file", rowid)
                for rowid, rel in space.workspace.candidates(literals[0] if literals else None)
            )
        return sorted(c for c in found if is_within(c[0], scope))

    def _unindexed_candidates(self, space: _Space, scope: str) -> Iterator[Candidate]:
        """The small unindexed documents of the areas the scope reaches."""
        if _overlaps(scope, "/working"):
            for label, note in space.fabric.blocks().items():
                yield f"/working/{label}.md", "text", render_note(note)
        if _overlaps(scope, "/.afi"):
            yield f"/.afi/{MANIFEST_NAME}", "text", self._manifest_bytes().decode()
        if _overlaps(scope, "/episodes"):
            for obs in space.ledger.observations():
                yield f"/episodes/{obs.id}.md", "text", render_note(episode_note(obs, space.fabric.memory.scope))
        if _overlaps(scope, "/sessions"):
            for sid in space.ledger.sessions():
                yield f"/sessions/{sid}.md", "session", sid

    def _load_texts(self, space: _Space, batch: builtins.list[Candidate]) -> builtins.list[str | None]:
        notes = space.notes.rendered_by_rowid([key for _, source, key in batch if source == "note"])
        files = space.workspace.texts_by_rowid([key for _, source, key in batch if source == "file"])
        texts: builtins.list[str | None] = []
        for path, source, key in batch:
            if source == "note":
                texts.append(notes.get(key))
            elif source == "file":
                texts.append(files.get(key))
            elif source == "session":
                texts.append(ledger_text(space.ledger, space.fabric.memory.scope, path)[1])
            else:
                texts.append(str(key))
        return texts

    def _semantic(self, space: _Space, request: SearchRequest, scope: str, limit: int) -> MatchPage:
        query = request.query
        assert isinstance(query, SemanticQuery)
        if not query.semantic.strip():
            raise InvalidPath("the semantic query is empty: ask a question")
        kinds = request.kinds or (["episode"] if is_within(scope, "/episodes") else _kinds_for_scope(scope))
        note_kinds = [k for k in kinds or ["fact", "file"] if k != "episode"]
        pairs = []
        if note_kinds:
            result = space.fabric.recall(query.semantic, kinds=note_kinds, as_of=request.as_of, top_k=32,
                                         budget=request.budget, scoring=SEARCH_SCORING)  # fmt: skip
            pairs = list(zip(result.hits, result.explain, strict=True))
        if kinds is not None and "episode" in kinds:
            memory = space.fabric.memory
            pairs += episode_recall(memory.embedder, space.ledger.observations(), query.semantic, top_k=32,
                                    scope=memory.scope)  # fmt: skip
            pairs.sort(key=lambda pair: -pair[0].score)
        rows = []
        for hit, explain in pairs:
            current = hit.kind in ("fact", "procedure") and hit.name is not None and self._is_current(space, hit)
            rows.append((hit, explain.model_dump(exclude_none=True), hit_path(hit, current)))
        return semantic_matches(rows, request, scope, limit)

    def _is_current(self, space: _Space, note: MemoryNote) -> bool:
        found = space.notes.current(note.kind, note.name or "")
        return found is not None and found[0].id == note.id

    # -- write verbs -----------------------------------------------------------------------

    def write(
        self,
        caller: Caller,
        path: str,
        data: bytes,
        *,
        offset: int | None = None,
        append: bool = False,
        create_only: bool = False,
        if_match: str | None = None,
    ) -> Entry:
        def run() -> Entry:
            node = self._writable(caller, path)
            if offset is not None and offset < 0:
                raise InvalidPath("offset must not be negative", path=node.path)
            space = self._space(caller.space)
            if node.area == "files":
                return self._write_file(space, node, data, offset, append, create_only, if_match)
            return self._write_note(space, node, data, offset, append, create_only, if_match)

        return self._audited(caller, "write", path, run)

    def _write_file(
        self,
        space: _Space,
        node: Node,
        data: bytes,
        offset: int | None,
        append: bool,
        create_only: bool,
        if_match: str | None,
    ) -> Entry:
        if if_match is not None:
            try:
                current = file_entry(node.path, space.workspace.stat(node.rest, node.path))
            except NotFound:
                raise Conflict("if_match was given but the file does not exist", path=node.path) from None
            _check_etag(current, if_match)
        info, full = space.workspace.write(
            node.rest, node.path, data, offset=offset, append=append, create_only=create_only
        )
        text = _note_text_of(full, node.rest, space.fabric.memory.limits.max_entry_text_chars)
        space.fabric.remember(kind="file", path=node.rest, content=text)
        return file_entry(node.path, info)

    def _write_note(
        self,
        space: _Space,
        node: Node,
        data: bytes,
        offset: int | None,
        append: bool,
        create_only: bool,
        if_match: str | None,
    ) -> Entry:
        name = node.note_name
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidPath("notes are UTF-8 text", path=node.path) from None
        existing = self._existing_note(space, node, name)
        if existing is not None and create_only:
            raise Conflict("the note exists and create_only was asked", path=node.path)
        if if_match is not None:
            if existing is None:
                raise Conflict("if_match was given but the note does not exist", path=node.path)
            _check_etag(self._note_entry(space, node), if_match)
        if offset not in (None, 0) and not append:
            raise Unsupported("notes are written whole: write from offset 0, or append", path=node.path)
        if append:
            fields: dict[str, Any] = {}
            base = existing.content if existing is not None else ""
            if base and not base.endswith("\n"):
                base += "\n"  # appended after the text as it reads (a note's body ends with a newline)
            content = base + text
        else:
            fields, content = parse_note(text)
        if _window_excludes_now(fields):
            raise InvalidPath(
                "the front matter's valid_from/valid_to window does not include now, and a note path holds the "
                "version valid now: record past or future versions with 'afi remember --valid-from/--valid-to'",
                path=node.path,
            )
        if node.kind == "working":
            note = space.fabric.remember(kind="working", block=name, content=content)
        else:
            if existing is not None and fields.get("supersedes") == existing.supersedes:
                fields.pop("supersedes", None)  # unchanged front matter from a read, not a new claim
            note = space.fabric.remember(kind=node.kind or "fact", name=name, content=content, **fields)
        try:
            return self._note_entry(space, node)
        except NotFound:  # stored, but no longer the version valid now (a clock edge): show where it lives
            return self._note_entry(space, Node(f"/history/{note.id}.md", "history", f"{note.id}.md"))

    def _existing_note(self, space: _Space, node: Node, name: str) -> MemoryNote | None:
        if node.kind == "working":
            return space.fabric.blocks().get(name)
        return space.fabric.find(node.kind or "fact", name)

    def mkdir(self, caller: Caller, path: str, *, parents: bool = False) -> Entry:
        def run() -> Entry:
            located = locate(normalize(path))
            if located is not None and (located.area == "root" or located.is_area_root):
                caller.require("afi:write", path=located.path)
                raise Conflict("this top-level folder always exists", path=located.path)
            node = self._writable(caller, path)
            if node.area != "files":
                raise Unsupported(f"/{node.area} holds notes, not folders; folders exist only under /files", path=path)
            return file_entry(
                node.path, self._space(caller.space).workspace.mkdir(node.rest, node.path, parents=parents)
            )

        return self._audited(caller, "mkdir", path, run)

    def delete(self, caller: Caller, path: str, *, recursive: bool = False) -> DeleteResult:
        def run() -> DeleteResult:
            node = self._writable(caller, path)
            space = self._space(caller.space)
            if node.area == "files":
                removed = space.workspace.delete(node.rest, node.path, recursive=recursive)
                for rel in removed:
                    note = space.fabric.find_file(rel)
                    if note is not None:
                        space.fabric.forget(id=note.id)
                return DeleteResult(deleted=max(1, len(removed)))
            name = node.note_name
            if node.kind == "working":
                if name not in space.fabric.blocks():
                    raise NotFound("no such working block", path=node.path)
                space.fabric.forget(block=name)
                return DeleteResult(deleted=1)
            note = space.fabric.find(node.kind or "fact", name)
            if note is None:
                raise NotFound("no such note", path=node.path)
            space.fabric.forget(id=note.id)
            return DeleteResult(deleted=1)

        return self._audited(caller, "delete", path, run)

    def move(self, caller: Caller, source: str, destination: str, *, overwrite: bool = False) -> Entry:
        def run() -> Entry:
            src = self._writable(caller, source)
            dst = self._writable(caller, destination)
            space = self._space(caller.space)
            if src.area == "files" and dst.area == "files":
                info, moved = space.workspace.move(src.rest, src.path, dst.rest, dst.path, overwrite=overwrite)
                for old, new in moved:
                    self._repoint(space, old, new)
                return file_entry(dst.path, info)
            if src.area != dst.area:
                raise Unsupported("a move stays within one folder kind (/files, /facts, ...)", path=destination)
            return self._move_note(space, src, dst, overwrite)

        return self._audited(caller, "move", f"{source} -> {destination}", run)

    def _move_note(self, space: _Space, src: Node, dst: Node, overwrite: bool) -> Entry:
        old, new = src.note_name, dst.note_name
        note = self._existing_note(space, src, old)
        if note is None:
            raise NotFound("no such note", path=src.path)
        if old == new:
            return self._note_entry(space, dst)
        if self._existing_note(space, dst, new) is not None and not overwrite:
            raise Conflict("the destination exists (ask to overwrite)", path=dst.path)
        if dst.kind == "working":
            space.fabric.remember(kind="working", block=new, content=note.content)
            space.fabric.forget(block=old)
        else:
            fields = {
                k: v
                for k, v in note.model_dump(
                    include={"valid_from", "valid_to", "tags", "keywords", "context", "importance", "source_entry_ids"}
                ).items()
                if v not in (None, [])
            }
            space.fabric.remember(kind=dst.kind or "fact", name=new, content=note.content, **fields)
            space.fabric.forget(id=note.id)
        return self._note_entry(space, dst)

    def _repoint(self, space: _Space, old: str, new: str) -> None:
        from .repoint import create_fabric_repoint_handler, repoint_source

        memory = space.fabric.memory
        repoint_source(memory, old, new, handlers=[create_fabric_repoint_handler(memory)])

    # -- helpers ---------------------------------------------------------------------------

    def _locate(self, path: str) -> Node:
        node = locate(path)
        if node is None:
            raise NotFound("no such file or folder", path=path)
        return node

    def _writable(self, caller: Caller, path: str) -> Node:
        caller.require("afi:write", path=path)
        normal = normalize(path)
        node = locate(normal)
        if node is None:
            raise Unsupported("the top-level folders are fixed: " + ", ".join("/" + a for a in AREAS), path=normal)
        if node.area == "root" or node.is_area_root:
            raise Forbidden("the top-level folders are fixed", path=node.path)
        if node.area in READ_ONLY_AREAS:
            raise Forbidden(f"/{node.area if node.area != 'afi' else '.afi'} is read-only", path=node.path)
        return node

    def _audited(self, caller: Caller, verb: str, path: str, run: Callable[[], T]) -> T:
        """Run one write verb under the space's write lock (so a check such as if_match and the write it
        guards cannot interleave with another thread's or process's write), and record it in the audit table."""
        try:
            _check_space_name(caller.space)
            with self._write_locks.hold(caller.space):
                result = run()
        except AfiError as err:
            self._audit(caller, verb, path, err.code)
            raise
        except PermissionError as err:
            self._audit(caller, verb, path, "forbidden")
            raise Forbidden(f"the operating system refused: {err.strerror}", path=path) from err
        except OSError as err:
            self._audit(caller, verb, path, "internal")
            raise Internal(f"the workspace could not be changed: {err.strerror}", path=path) from err
        except Exception:
            self._audit(caller, verb, path, "internal")
            raise
        self._audit(caller, verb, path, "ok")
        return result

    def _audit(self, caller: Caller, verb: str, path: str, result: str) -> None:
        self.audit.record(caller, verb, path, result)

    def audit_log(self, *, limit: int = 100) -> builtins.list[dict[str, Any]]:
        """The most recent audit rows, newest first."""
        return self.audit.recent(limit=limit)

    def _manifest_bytes(self) -> bytes:
        return self._manifest_and_body()[1]

    def _note_text(self, space: _Space, node: Node) -> tuple[Entry, str]:
        if node.area in ("episodes", "sessions"):
            node.note_name  # noqa: B018 - refuses nested or non-.md names
            return ledger_text(space.ledger, space.fabric.memory.scope, node.path)
        name = node.note_name
        if node.area == "working":
            note = space.fabric.blocks().get(name)
            if note is None:
                raise NotFound("no such working block", path=node.path)
            text = render_note(note)
            return block_entry(name, note, text), text
        found = space.notes.version(name) if node.area == "history" else space.notes.current(node.kind or "", name)
        if found is None:
            raise NotFound("no such note", path=node.path)
        row, rendered = found
        return row_entry(node.path, row, writable=node.area != "history"), rendered

    def _note_entry(self, space: _Space, node: Node) -> Entry:
        return self._note_text(space, node)[0]

    # -- the fabric's own verbs (what the tree cannot say: past windows, file notes, holds) ----

    def remember(self, caller: Caller, **fields: Any) -> MemoryNote:
        """``remember`` on the caller's space with the fabric's fields; needs afi:write, locked and audited
        like a write through any door."""
        kind = str(fields.get("kind", "fact"))
        label = fields.get("name") or fields.get("block")
        where = note_path(kind, str(label)) if label else f"/files/{fields['path']}" if fields.get("path") else "/"

        def run() -> MemoryNote:
            caller.require("afi:write", path=where)
            space = self._space(caller.space)
            if fields.get("path") is not None:
                space.workspace.jail.resolve(str(fields["path"]))  # a file note names a file inside the jail
            return space.fabric.remember(**fields)

        return self._audited(caller, "remember", where, run)

    def forget(
        self, caller: Caller, *, id: str | None = None, block: str | None = None, hold: bool = False
    ) -> ForgetResult:
        """``forget`` one note by id (``hold`` keeps it under legal hold) or clear one working block;
        needs afi:write, locked and audited."""
        where = f"/history/{id}.md" if id is not None else f"/working/{block}.md"

        def run() -> ForgetResult:
            caller.require("afi:write", path=where)
            return self._space(caller.space).fabric.forget(id=id, block=block, hold=hold)

        return self._audited(caller, "forget", where, run)

    # -- the observational ledger: /episodes, /sessions, x-conversation, ledger writes -------

    def ledger_write(self, caller: Caller, op: str, session: str, body: dict[str, Any]) -> dict[str, Any]:
        """Append to a session's branch (``op`` one of LEDGER_OPS); needs afi:write, audited."""

        def run() -> dict[str, Any]:
            caller.require("afi:write", path=f"/sessions/{session}.md")
            return apply_op(self._space(caller.space).ledger, op, session, body)

        return self._audited(caller, f"ledger.{op}", f"/sessions/{session}.md", run)


# -- module helpers ------------------------------------------------------------------------


def _default_keys(db: Path) -> Any:
    from afi.auth.keys import KeyStore

    return KeyStore(db)


def _workspace_schema() -> str:
    from .workspace import SCHEMA

    return SCHEMA


def _check_space_name(name: str) -> None:
    if not SPACE_NAME.match(name):
        raise InvalidPath(f"invalid space name {name!r}: use [a-z0-9][a-z0-9._-]{{0,63}}")


def _overlaps(scope: str, area: str) -> bool:
    """True when a search scope and a folder share paths (one lies within the other)."""
    return is_within(scope, area) or is_within(area, scope)


def _check_limit(limit: int, cap: int) -> int:
    if not isinstance(limit, int) or limit <= 0:
        raise InvalidPath(f"limit must be a positive whole number (at most {cap}), not {limit!r}")
    return min(limit, cap)


def _check_etag(entry: Entry, if_match: str) -> None:
    wanted = {tag.strip() for tag in if_match.split(",")}
    if "*" not in wanted and entry.etag not in wanted:
        raise Conflict("the target changed since it was read (if_match does not match its etag)", path=entry.path)


def _sql_glob(glob: str | None) -> str | None:
    """fnmatch's ``[!x]`` is SQLite GLOB's ``[^x]``; the rest is the same."""
    return None if glob is None else glob.replace("[!", "[^")


def _page(entries: list[Entry], limit: int) -> Page:
    if len(entries) > limit:
        entries = entries[:limit]
        last = entries[-1].path.rsplit("/", 1)[-1]
        return Page(entries=entries, next_cursor=encode_cursor("list", {"a": last}))
    return Page(entries=entries)


def _kinds_for_scope(scope: str) -> list[str] | None:
    for prefix, kinds in (("/facts", ["fact"]), ("/procedures", ["procedure"]), ("/files", ["file"])):
        if is_within(scope, prefix):
            return kinds
    if is_within(scope, "/history"):
        return ["fact", "procedure", "file"]
    return None


def _note_text_of(data: bytes | None, rel: str, cap: int) -> str:
    """The text a file's note indexes: the file's text (cut at the note cap), or its path when binary."""
    if data is None or b"\x00" in data:
        return rel
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return rel
    return text[:cap] if text.strip() else rel


def _window_excludes_now(fields: dict[str, Any]) -> bool:
    """True when written front matter puts the note's validity window wholly before or after now."""
    now = datetime.now(UTC)

    def moment(value: Any) -> datetime:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)

    try:
        starts = fields.get("valid_from")
        ends = fields.get("valid_to")
        return (starts is not None and moment(starts) > now) or (ends is not None and moment(ends) <= now)
    except ValueError:
        return False  # a malformed timestamp: the fabric refuses it with its own message
