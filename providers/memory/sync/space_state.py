"""A space's working blocks and snapshots in a sync: small, sent whole, merged alike on both sides.

**Blocks.** Each block records the digests of the states it replaced (``seen``), so a merge tells an
edit made after seeing the other side's state (it wins: the user replaced that text) from two edits
made apart. Two edits made apart are a conflict: the later write (then the larger digest) stays under
the label and the other is kept as a block of its own, ``<label>.conflict-<digest>``, readable under
``/working`` until the user deletes it. A cleared block (a tombstone) merges the same way.

**Folders.** Each folder's last ``mkdir`` or ``rmdir`` (:mod:`..tree.folder_history`) merges by time:
the later wins, and the disk follows, so an empty folder made on one side appears on the other, and
one removed goes (unless files are in it).

**Snapshots.** A snapshot is a name and an instant. Both sides end with the union, less the snapshots
deleted on either side (``snapshot_drops`` keeps what was deleted, so a peer's copy is not brought
back). One name given to two instants: the snapshot taken first keeps the name, the other is kept as
``<name>.conflict-<digest>``.

The state is plain JSON::

    {"store": <id>, "space": <name>, "version": 7, "blocks": {<label>: {...}},
     "snapshots": [{"name", "at", "created_at"}], "dropped": [{"name", "at", "created_at", "dropped_at"}]}
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from afi.errors import AfiError, InvalidPath, TooLarge
from afi.storage.database import Connection, Database

from ..bundle.checks import check_instant, check_snapshot
from ..fabric.working import BLOCK_LABEL, block_digest, block_id, merged_seen
from ..tree.folder_history import FOLDER_OPS
from ..workspace.workspace import is_reserved

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["SpaceState", "StateApplied", "apply_space_state", "read_space_state"]

MAX_BLOCKS = 10_000
MAX_SNAPSHOTS = 100_000
MAX_BLOCK_CHARS = 1_000_000
MAX_FOLDERS = 100_000
_CONFLICT = ".conflict-"


@dataclass
class SpaceState:
    """A space's working blocks (with the working value's version) and its snapshots, kept and dropped."""

    store: str
    space: str
    version: int = 0
    blocks: dict[str, dict[str, Any]] = field(default_factory=dict)
    snapshots: list[dict[str, str]] = field(default_factory=list)
    dropped: list[dict[str, str]] = field(default_factory=list)
    folders: dict[str, list[str]] = field(default_factory=dict)  # path -> [op, at], its last mkdir or rmdir

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "space": self.space, "version": self.version, "blocks": self.blocks,
                "snapshots": self.snapshots, "dropped": self.dropped, "folders": self.folders}  # fmt: skip

    @classmethod
    def from_json(cls, data: Any) -> SpaceState:
        """Given a state as received, return it checked; InvalidPath naming what is wrong."""
        keys = {"store", "space", "version", "blocks", "snapshots", "dropped", "folders"}
        if not isinstance(data, dict) or set(data) != keys:
            raise InvalidPath(f"a space's sync state is an object of exactly {', '.join(sorted(keys))}")
        if not all(isinstance(data[k], str) and data[k] for k in ("store", "space")):
            raise InvalidPath("a sync state's store and space are non-empty strings")
        version = data["version"]
        if not isinstance(version, int) or isinstance(version, bool) or not 0 <= version < 2**62:
            raise InvalidPath("a sync state's version is a whole number")
        blocks, snapshots, dropped = data["blocks"], data["snapshots"], data["dropped"]
        if not isinstance(blocks, dict) or not isinstance(snapshots, list) or not isinstance(dropped, list):
            raise InvalidPath("a sync state's blocks is an object, its snapshots and dropped lists")
        if len(blocks) > MAX_BLOCKS or len(snapshots) + len(dropped) > MAX_SNAPSHOTS:
            raise TooLarge(f"a sync state holds at most {MAX_BLOCKS} blocks and {MAX_SNAPSHOTS} snapshots")
        for label, block in blocks.items():
            _check_block(label, block)
        for index, snapshot in enumerate(snapshots):
            _check_snapshot(snapshot, f"snapshots[{index}]", ("name", "at", "created_at"))
        for index, drop in enumerate(dropped):
            _check_snapshot(drop, f"dropped[{index}]", ("name", "at", "created_at", "dropped_at"))
        folders = data["folders"]
        if not isinstance(folders, dict) or len(folders) > MAX_FOLDERS:
            raise InvalidPath(f"a sync state's folders map up to {MAX_FOLDERS} paths to [op, at]")
        for path, last in folders.items():
            _check_folder(path, last)
        return cls(data["store"], data["space"], version, blocks, snapshots, dropped, folders)


@dataclass
class StateApplied:
    """What merging a peer's state changed here: blocks written, conflicts kept aside, snapshots."""

    blocks: int = 0
    conflicts: list[str] = field(default_factory=list)  # the labels and names a conflict's loser took
    snapshots: int = 0
    dropped: int = 0
    folders: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"blocks": self.blocks, "conflicts": self.conflicts, "snapshots": self.snapshots,
                "dropped": self.dropped, "folders": self.folders}  # fmt: skip

    @classmethod
    def from_json(cls, data: Any) -> StateApplied:
        try:
            return cls(int(data["blocks"]), [str(c) for c in data["conflicts"]], int(data["snapshots"]),
                       int(data["dropped"]), int(data["folders"]))  # fmt: skip
        except (KeyError, TypeError, ValueError):
            raise InvalidPath("the peer answered a state apply with something that is not a report of one") from None


def _check_block(label: Any, block: Any) -> None:
    where = f"blocks[{label!r}]"
    if not isinstance(label, str) or not BLOCK_LABEL.match(label):
        raise InvalidPath(f"{where}: a block label is [a-z0-9][a-z0-9._-] (up to 64 characters)")
    allowed = {"id", "content", "created_at", "updated_at", "importance", "forgotten_at", "seen"}
    if not isinstance(block, dict) or not set(block) <= allowed or not isinstance(block.get("content"), str):
        raise InvalidPath(f"{where}: a block is an object with content and some of {', '.join(sorted(allowed))}")
    if len(block["content"]) > MAX_BLOCK_CHARS:
        raise TooLarge(f"{where}: content over {MAX_BLOCK_CHARS} characters")
    try:
        for key in ("created_at", "updated_at", "forgotten_at"):
            if block.get(key) is not None:
                check_instant(block[key], key, where)
    except AfiError as err:
        raise InvalidPath(f"{where}: {err.message}") from None
    if block.get("id") not in (None, block_id(label)):
        raise InvalidPath(f"{where}: id is the label's ({block_id(label)})")
    importance = block.get("importance")
    if importance is not None and (not isinstance(importance, int | float) or isinstance(importance, bool)):
        raise InvalidPath(f"{where}: importance is a number")
    seen = block.get("seen", [])
    if not isinstance(seen, list) or len(seen) > 64 or not all(isinstance(d, str) and len(d) == 16 for d in seen):
        raise InvalidPath(f"{where}: seen lists up to 64 digests of 16 hex digits")


def _check_folder(path: Any, last: Any) -> None:
    where = f"folders[{str(path)[:80]!r}]"
    if not isinstance(path, str) or not path or path.startswith("/") or "" in path.split("/") or "\x00" in path:
        raise InvalidPath(f"{where}: a folder is a workspace path such as notes/2026, without a leading /")
    if any(part in (".", "..") or is_reserved(part) for part in path.split("/")) or len(path) > 4096:
        raise InvalidPath(f"{where}: not a path a workspace folder has")
    if not isinstance(last, list) or len(last) != 2 or last[0] not in FOLDER_OPS or not isinstance(last[1], str):
        raise InvalidPath(f"{where}: [op, at] with op one of {', '.join(FOLDER_OPS)}")
    try:
        check_instant(last[1], "at", where)
    except AfiError as err:
        raise InvalidPath(f"{where}: {err.message}") from None


def _check_snapshot(snapshot: Any, where: str, keys: tuple[str, ...]) -> None:
    if (
        not isinstance(snapshot, dict)
        or set(snapshot) != set(keys)
        or not all(isinstance(snapshot[k], str) for k in keys)
    ):
        raise InvalidPath(f"{where}: an object of exactly {', '.join(keys)} (strings)")
    try:
        check_snapshot(snapshot["name"], snapshot["at"], snapshot["created_at"], where)
        if "dropped_at" in snapshot:
            check_instant(snapshot["dropped_at"], "dropped_at", where)
    except AfiError as err:
        raise InvalidPath(f"{where}: {err.message}") from None


def _scope(space: str) -> tuple[str, str, str]:
    return ("afi", space, "main")


def read_space_state(database: Database, *, store: str, space: str) -> SpaceState:
    """Given a store and a space, return its blocks and snapshots as a sync sends them."""
    state = SpaceState(store, space)
    with database.read() as conn:
        row = conn.execute("SELECT value, version FROM working WHERE tenant_id = ? AND resource_id = ? "
                           "AND thread_id = ?", _scope(space)).fetchone()  # fmt: skip
        if row is not None:
            state.version, state.blocks = int(row[1]), _blocks_of(json.loads(row[0]))
        kept = conn.execute("SELECT name, at, created_at FROM snapshots WHERE space = ? ORDER BY name", (space,))
        state.snapshots = [{"name": n, "at": a, "created_at": c} for n, a, c in kept.fetchall()]
        state.dropped = [{"name": n, "at": a, "created_at": c, "dropped_at": d} for n, a, c, d in conn.execute(
            "SELECT name, at, created_at, dropped_at FROM snapshot_drops WHERE space = ? ORDER BY name, at",
            (space,)).fetchall()]  # fmt: skip
        kept = conn.execute("SELECT path, op, at FROM folder_ops WHERE space = ? ORDER BY path", (space,))
        state.folders = {str(path): [str(op), str(at)] for path, op, at in kept.fetchall()}
    return state


def _blocks_of(value: Any) -> dict[str, dict[str, Any]]:
    fabric = value.get("_fabric") if isinstance(value, dict) else None
    blocks = fabric.get("blocks") if isinstance(fabric, dict) else None
    return {k: v for k, v in blocks.items() if isinstance(v, dict)} if isinstance(blocks, dict) else {}


def apply_space_state(conn: Connection, state: SpaceState, *, space: str, held: Space) -> StateApplied:
    """Merge a peer's blocks, snapshots and folders into the space, in the caller's transaction (the
    folders on disk follow before it commits: making or removing an empty folder twice is harmless)."""
    applied = StateApplied()
    _merge_blocks(conn, state, space, applied)
    _merge_snapshots(conn, state, space, applied)
    _merge_folders(conn, state, space, held, applied)
    return applied


def _merge_folders(conn: Connection, state: SpaceState, space: str, held: Space, applied: StateApplied) -> None:
    """Each folder's later operation wins (then ``rmdir``); the disk follows: a folder made when it is
    missing, removed when it is there and empty (files in it keep it)."""
    ours = {str(p): (str(o), str(a)) for p, o, a in conn.execute(
        "SELECT path, op, at FROM folder_ops WHERE space = ?", (space,)).fetchall()}  # fmt: skip
    changed: list[tuple[str, str]] = []
    for path in sorted(state.folders):
        op, at = state.folders[path]
        try:
            normal = held.workspace.jail.normal(path)
        except AfiError as err:
            raise InvalidPath(f"folders[{path[:80]!r}]: {err.message}") from None
        if normal != path:
            raise InvalidPath(f"folders[{path[:80]!r}]: not a path a workspace folder has (it reads as {normal!r})")
        mine = ours.get(path)
        if mine is not None and (mine[1], mine[0]) >= (at, op):
            continue
        conn.execute("INSERT INTO folder_ops (space, path, op, at) VALUES (?, ?, ?, ?) ON CONFLICT (space, path) "
                     "DO UPDATE SET op = excluded.op, at = excluded.at", (space, path, op, at))  # fmt: skip
        applied.folders += 1
        changed.append((path, op))
    # parents made before their folders; folders removed before their parents
    for path, op in sorted(changed, key=lambda c: (c[1] == "rmdir", c[0] if c[1] == "mkdir" else "", -len(c[0]))):
        try:
            if op == "mkdir":
                held.workspace.mkdir(path, f"/files/{path}", parents=True)
            else:
                held.workspace.delete(path, f"/files/{path}", recursive=False)
        except AfiError:
            pass  # already there, already gone, or a folder with files in it: left as it is


def _stamp(block: dict[str, Any]) -> str:
    return str(block.get("updated_at") or block.get("forgotten_at") or block.get("created_at") or "")


def _sibling(name: str, digest: str) -> str:
    return f"{name[: 64 - len(_CONFLICT) - 6]}{_CONFLICT}{digest[:6]}"


def merge_block(label: str, ours: dict[str, Any] | None, theirs: dict[str, Any] | None,
                ) -> tuple[dict[str, Any], tuple[str, dict[str, Any]] | None]:  # fmt: skip
    """Given two states of one block, return the merged state and, for two edits made apart, the
    loser as ``(label, block)`` to keep beside it (None when nothing is to be kept)."""
    if ours is None or theirs is None:
        found = ours or theirs
        assert found is not None
        return found, None
    mine, other = block_digest(ours), block_digest(theirs)
    if mine == other:
        return {**ours, "seen": merged_seen(ours, theirs)} if ours.get("seen") != theirs.get("seen") else ours, None
    if other in ours.get("seen", []):
        return {**ours, "seen": merged_seen(ours, theirs)}, None
    if mine in theirs.get("seen", []):
        return {**theirs, "seen": merged_seen(ours, theirs)}, None
    winner, loser = (ours, theirs) if (_stamp(ours), mine) > (_stamp(theirs), other) else (theirs, ours)
    loser_digest = block_digest(loser)
    merged = {**winner, "seen": merged_seen(ours, theirs, extra=loser_digest)}
    if loser.get("forgotten_at") or not loser.get("content"):
        return merged, None
    kept_label = _sibling(label, loser_digest)
    kept = {"id": block_id(kept_label), "content": loser["content"], "created_at": _stamp(loser),
            "updated_at": _stamp(loser)}  # fmt: skip
    return merged, (kept_label, kept)


def _merge_blocks(conn: Connection, state: SpaceState, space: str, applied: StateApplied) -> None:
    row = conn.execute("SELECT value, version FROM working WHERE tenant_id = ? AND resource_id = ? "
                       "AND thread_id = ?", _scope(space)).fetchone()  # fmt: skip
    value: dict[str, Any] = json.loads(row[0]) if row is not None else {}
    if not isinstance(value, dict):
        value = {}
    version = int(row[1]) if row is not None else 0
    ours = _blocks_of(value)
    merged = dict(ours)
    for label in sorted(state.blocks):
        block, kept = merge_block(label, merged.get(label), state.blocks[label])
        merged[label] = block
        if kept is not None:
            kept_label, kept_block = kept
            merged[kept_label], _ = merge_block(kept_label, merged.get(kept_label), kept_block)
            applied.conflicts.append(kept_label)
    changed = merged != ours
    applied.blocks = sum(1 for label in merged if merged[label] != ours.get(label))
    # the peer's version when this is now its state (so both read alike), else one past both (so a
    # writer's compare-and-swap against the old value fails)
    if not changed or (merged == state.blocks and state.version > version):
        new_version = max(version, state.version)
    else:
        new_version = max(version, state.version) + 1
    if not changed and new_version == version:
        return
    raw_fabric = value.get("_fabric")
    fabric: dict[str, Any] = raw_fabric if isinstance(raw_fabric, dict) else {}
    payload = json.dumps({**value, "_fabric": {**fabric, "blocks": merged}}, separators=(",", ":"),
                         ensure_ascii=False)  # fmt: skip
    if row is None:
        conn.execute("INSERT INTO working (tenant_id, resource_id, thread_id, value, version) VALUES (?, ?, ?, ?, ?)",
                     (*_scope(space), payload, new_version))  # fmt: skip
    else:
        conn.execute("UPDATE working SET value = ?, version = ? WHERE tenant_id = ? AND resource_id = ? "
                     "AND thread_id = ?", (payload, new_version, *_scope(space)))  # fmt: skip


def _snapshot_key(s: dict[str, str]) -> tuple[str, str, str]:
    return (s["name"], s["at"], s["created_at"])


def _merge_snapshots(conn: Connection, state: SpaceState, space: str, applied: StateApplied) -> None:
    for drop in state.dropped:
        conn.execute(
            "INSERT INTO snapshot_drops (space, name, at, created_at, dropped_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (space, name, at, created_at) DO NOTHING",
            (space, drop["name"], drop["at"], drop["created_at"], drop["dropped_at"]),
        )  # fmt: skip
        gone = conn.execute("DELETE FROM snapshots WHERE space = ? AND name = ? AND at = ? AND created_at = ? "
                            "RETURNING name", (space, *_snapshot_key(drop))).fetchone()  # fmt: skip
        applied.dropped += gone is not None
    dropped = {tuple(r) for r in conn.execute("SELECT name, at, created_at FROM snapshot_drops WHERE space = ?",
                                              (space,)).fetchall()}  # fmt: skip
    ours = {str(n): (str(a), str(c)) for n, a, c in conn.execute(
        "SELECT name, at, created_at FROM snapshots WHERE space = ?", (space,)).fetchall()}  # fmt: skip
    for snapshot in sorted(state.snapshots, key=_snapshot_key):
        key = _snapshot_key(snapshot)
        if key in dropped:
            continue
        name, at, created = key
        held = ours.get(name)
        if held == (at, created):
            continue
        if held is None:
            _add_snapshot(conn, space, name, at, created, ours, applied)
            continue
        digest = hashlib.sha256(f"{at}\x00{created}".encode()).hexdigest()
        if (created, at) < (held[1], held[0]):  # theirs was taken first: it keeps the name, ours moves aside
            held_digest = hashlib.sha256(f"{held[0]}\x00{held[1]}".encode()).hexdigest()
            moved = _sibling(name, held_digest)
            conn.execute("DELETE FROM snapshots WHERE space = ? AND name = ?", (space, name))
            del ours[name]
            if ours.get(moved) is None:
                _add_snapshot(conn, space, moved, held[0], held[1], ours, applied)
            _add_snapshot(conn, space, name, at, created, ours, applied)
            applied.conflicts.append(moved)
        else:
            moved = _sibling(name, digest)
            if ours.get(moved) is None:
                _add_snapshot(conn, space, moved, at, created, ours, applied)
            applied.conflicts.append(moved)


def _add_snapshot(conn: Connection, space: str, name: str, at: str, created: str, ours: dict[str, tuple[str, str]],
                  applied: StateApplied) -> None:  # fmt: skip
    conn.execute("INSERT INTO snapshots (space, name, at, created_at) VALUES (?, ?, ?, ?)", (space, name, at, created))
    ours[name] = (at, created)
    applied.snapshots += 1
