"""The memory provider: the AFI verbs over the tree of a space (docs/design.md, "The tree a space shows").

Each verb checks the caller, normalises the path, finds the area it lands in, and hands it to that
area's handler (``tree/``: files, notes, working, history, ledger, afi) once; ``search`` goes to
``search/``. Every write verb runs under the space's write lock and is recorded in the ``audit``
table, refused or not.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from afi.auth.audit import AuditLog
from afi.errors import AfiError, Conflict, Forbidden, Internal, InvalidPath, NotFound, Unauthorized, Unsupported
from afi.model import DeleteResult, Entry, Manifest, MatchPage, Page, ReadResult, SearchRequest
from afi.paths import normalize
from afi.provider import Caller
from afi.storage.database import open_database, store_location

from .admin import AdminVerbs
from .bundle.apply import store_holds_nothing
from .claims import sweep_claims
from .fabric.batch import check_batch, naming
from .fabric.choice import EmbedderChoice
from .fabric.embedders import Embedder
from .fabric.fabric import MemoryFabric
from .fabric.types import ForgetResult, MemoryNote
from .import_verbs import ImportVerbs
from .ledger.ops import apply_op
from .search.search import Search
from .spaces import Space, Spaces, check_space_name
from .sync_verbs import SyncVerbs
from .time_verbs import TimeVerbs
from .tree.afi import AfiArea, memory_manifest
from .tree.base import MAX_LIST, Area, Listing, WriteOptions
from .tree.locate import AREAS, READ_ONLY_AREAS, Node, locate, note_path
from .tree.root import area_handlers
from .workspace.advisory import AdvisorySpaceLocks
from .workspace.locks import SpaceLocks, lock_folder
from .workspace.workspace import WorkspaceLimits

__all__ = ["MemoryProvider"]

T = TypeVar("T")


def _file_locks(db: str | Path) -> SpaceLocks:
    return SpaceLocks(lock_folder(Path(db)))


class MemoryProvider(AdminVerbs, TimeVerbs, ImportVerbs, SyncVerbs):
    """An AFI provider at profile 3 over the memory fabric and a jailed workspace per space."""

    def __init__(
        self,
        db: str | Path,
        root: str | Path,
        *,
        keys: Any = None,
        embedder: Embedder | EmbedderChoice | None = None,
        manifest_extra: dict[str, Any] | None = None,
        workspace_limits: WorkspaceLimits | None = None,
    ) -> None:
        if str(db) == ":memory:":
            raise ValueError("MemoryProvider needs a database file: every worker thread opens its own connection")
        self.db: str | Path = store_location(db)
        self.root = Path(root).expanduser()
        self.root.mkdir(parents=True, exist_ok=True)
        self.workspace_limits = workspace_limits or WorkspaceLimits.from_env()
        self._db = open_database(self.db)
        self.audit = AuditLog(self._db)
        self._keys = keys if keys is not None else _default_keys(self.db)
        # a lock file per space beside a SQLite file; an advisory lock in the verb's transaction on PostgreSQL
        lite: Callable[[], SpaceLocks | AdvisorySpaceLocks] = partial(_file_locks, self.db)
        advisory: Callable[[], SpaceLocks | AdvisorySpaceLocks] = partial(AdvisorySpaceLocks, self._db)
        self._write_locks = self._db.engine.choose(sqlite=lite, postgresql=advisory)()
        self._spaces = Spaces(self.db, self._db, self.root, self.workspace_limits, self._write_locks, embedder)
        # what an import or fork killed mid-way left in the root is undone before anything else is done
        sweep_claims(self.root, self._db, self._write_locks.hold, partial(store_holds_nothing, self._db))
        extra = dict(manifest_extra or {})
        self._afi = AfiArea(
            lambda required: memory_manifest(required, embedder=self.embedder(),
                                             file_max_bytes=self.workspace_limits.max_file_bytes, extra=extra),
            lambda: self._keys is not None and not self._keys.keyless(),
        )  # fmt: skip
        self._areas: dict[str, Area] = area_handlers(self._afi)
        self._search = Search(self._afi.body)

    # -- discovery & auth ------------------------------------------------------------------

    def embedder(self) -> Embedder:
        """The embedder recall and remember use in every space of this store (its model loads at the
        first text it embeds)."""
        return self._spaces.embedder()

    def check_embedder(self, space: str = "default") -> None:
        """Open ``space``: a store refuses an embedder its vectors did not come from, naming both.

        Raises:
            MemoryValidationError: the store's vectors come from another embedder.
        """
        self._space(space)

    def load_embedder(self) -> None:
        """Have the embedder embed a sentence, so a model is loaded before the first write needs it."""
        self.embedder().embed(["afi-memory loads its embedder before the first write"])

    def manifest(self) -> Manifest:
        """The manifest; ``auth.required`` follows keys created while serving (the only part that changes)."""
        return self._afi.manifest()

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

    def _space(self, name: str) -> Space:
        return self._spaces.get(name)

    # -- read verbs ------------------------------------------------------------------------

    def stat(self, caller: Caller, path: str) -> Entry:
        caller.require("afi:read")
        node = self._locate(normalize(path))
        return self._areas[node.area].stat(self._space(caller.space), node)

    def list(
        self, caller: Caller, path: str, *, limit: int = MAX_LIST, cursor: str | None = None, glob: str | None = None
    ) -> Page:
        caller.require("afi:read")
        path = normalize(path)
        listing = Listing.of(limit, glob)
        node = self._locate(path)
        return self._areas[node.area].list(self._space(caller.space), node, listing.at(cursor))

    def read(self, caller: Caller, path: str, *, offset: int = 0, length: int | None = None) -> ReadResult:
        caller.require("afi:read")
        path = normalize(path)
        if offset < 0 or (length is not None and length < 0):
            raise InvalidPath("offset and length must not be negative", path=path)
        node = self._locate(path)
        return self._areas[node.area].read(self._space(caller.space), node, offset, length)

    def search(self, caller: Caller, request: SearchRequest) -> MatchPage:
        caller.require("afi:read")
        return self._search.run(caller.space, self._space(caller.space), request)

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
            options = WriteOptions(offset, append, create_only, if_match)
            return self._areas[node.area].write(self._space(caller.space), node, data, options)

        return self._audited(caller, "write", path, run)

    def mkdir(self, caller: Caller, path: str, *, parents: bool = False) -> Entry:
        def run() -> Entry:
            located = locate(normalize(path))
            if located is not None and (located.area == "root" or located.is_area_root):
                caller.require("afi:write", path=located.path)
                raise Conflict("this top-level folder always exists", path=located.path)
            node = self._writable(caller, path)
            return self._areas[node.area].mkdir(self._space(caller.space), node, parents=parents)

        return self._audited(caller, "mkdir", path, run)

    def delete(self, caller: Caller, path: str, *, recursive: bool = False) -> DeleteResult:
        def run() -> DeleteResult:
            node = self._writable(caller, path)
            return self._areas[node.area].delete(self._space(caller.space), node, recursive=recursive)

        return self._audited(caller, "delete", path, run)

    def move(self, caller: Caller, source: str, destination: str, *, overwrite: bool = False) -> Entry:
        def run() -> Entry:
            src = self._writable(caller, source)
            dst = self._writable(caller, destination)
            if src.area != dst.area:
                raise Unsupported("a move stays within one folder kind (/files, /facts, ...)", path=destination)
            return self._areas[src.area].move(self._space(caller.space), src, dst, overwrite=overwrite)

        return self._audited(caller, "move", f"{source} -> {destination}", run, where=source)

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

    def _audited(self, caller: Caller, verb: str, path: str, run: Callable[[], T], *, where: str | None = None) -> T:
        """Run one write verb under the space's write lock (so a check such as if_match and the write it
        guards cannot interleave with another thread's, process's or replica's write), in one transaction
        with its audit row: the verb's rows and the audit row commit together or not at all. A refusal
        rolls the transaction back and is then recorded on its own.

        One exception: on SQLite, whose write lock is the whole file's, a verb on ``/files`` does not
        hold it while the bytes go to disk (a large file would stall every other space's writers past
        the busy timeout); its index rows, rebuilt from the disk anyway, commit in their own short
        transactions after the bytes, and its audit row after them.
        """
        whole = not self._db.engine.one_writer_at_a_time or not _in_files(where or path)
        try:
            check_space_name(caller.space)
            with self._write_locks.hold(caller.space), self._db.transaction() if whole else nullcontext():
                result = run()
                self.audit.record(caller, verb, path, "ok")
        except AfiError as err:
            self.audit.record(caller, verb, path, err.code)
            raise
        except PermissionError as err:
            self.audit.record(caller, verb, path, "forbidden")
            raise Forbidden(f"the operating system refused: {err.strerror}", path=path) from err
        except OSError as err:
            self.audit.record(caller, verb, path, "internal")
            raise Internal(f"the workspace could not be changed: {err.strerror}", path=path) from err
        except Exception:
            self.audit.record(caller, verb, path, "internal")
            raise
        return result

    def audit_log(self, *, limit: int = 100) -> builtins.list[dict[str, Any]]:
        """The most recent audit rows, newest first."""
        return self.audit.recent(limit=limit)

    # -- the fabric's own verbs (what the tree cannot say: past windows, file notes, holds) ----

    def remember(self, caller: Caller, **fields: Any) -> MemoryNote:
        """``remember`` on the caller's space with the fabric's fields; needs afi:write, locked and audited
        like a write through any door."""
        where = _note_where(fields)

        def run() -> MemoryNote:
            caller.require("afi:write", path=where)
            space = self._space(caller.space)
            if fields.get("path") is not None:
                space.workspace.jail.resolve(str(fields["path"]))  # a file note names a file inside the jail
            return space.fabric.remember(**fields)

        return self._audited(caller, "remember", where, run)

    def remember_many(self, caller: Caller, notes: builtins.list[dict[str, Any]]) -> builtins.list[MemoryNote]:
        """``remember`` a batch of notes on the caller's space in one transaction (the fabric's
        ``remember_many``): needs afi:write, locked and audited once, as ``remember_many``; one refusal
        (naming the item, ``notes[3]: ...``) writes none of them."""

        def run() -> builtins.list[MemoryNote]:
            caller.require("afi:write", path="/")
            space = self._space(caller.space)
            items = check_batch(notes)  # its shape and size, before any item is looked at
            for index, fields in enumerate(items):
                if fields.get("kind") == "file" and fields.get("path") is not None:
                    with naming(index):  # a file note names a file inside the jail
                        space.workspace.jail.resolve(str(fields["path"]))
            return space.fabric.remember_many(items)

        return self._audited(caller, "remember_many", "/", run)

    def append_block(self, caller: Caller, block: str, text: str) -> tuple[MemoryNote, bool]:
        """Append a line of text to a working block of the caller's space; return the block's note and
        whether this append created it. Needs afi:write, locked and audited like remember."""
        where = f"/working/{block}.md"

        def run() -> tuple[MemoryNote, bool]:
            caller.require("afi:write", path=where)
            fabric = self._space(caller.space).fabric
            created = block not in fabric.blocks()
            return fabric.append_block(block, text), created

        return self._audited(caller, "append_block", where, run)

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


def _note_where(fields: dict[str, Any]) -> str:
    """The path a remember's fields land at: its note path, its file's, or the root."""
    kind = str(fields.get("kind", "fact"))
    label = fields.get("name") or fields.get("block")
    return note_path(kind, str(label)) if label else f"/files/{fields['path']}" if fields.get("path") else "/"


def _in_files(path: str) -> bool:
    """Whether a verb's path lands in ``/files`` (a path that does not normalize lands nowhere)."""
    try:
        node = locate(normalize(path))
    except AfiError:
        return False
    return node is not None and node.area == "files"


def _default_keys(db: str | Path) -> Any:
    from afi.auth.keys import KeyStore

    return KeyStore(db)
