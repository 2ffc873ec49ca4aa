"""Workspace files in a sync: their kept versions travel, each blob once, and each side's ``/files``
then holds the newest version of every path it was sent.

A file version is ``(path, sha256, size, at, op)``: what the path held from ``at`` on (absent when
``sha256`` is null). Versions are immutable, so a sync adds the ones a side lacks (the same five
values are the same version, whatever row id each store gave it) and never merges. The sender
includes in ``blobs`` the bytes of each version it keeps, once a batch; a version whose bytes it
never kept (a file over the history's size cap) travels with its hash and size alone.

After the batch commits, each path it touched is brought on disk to its newest version, the same on
every store: the latest ``at``, then the digest, then the op (:func:`newest`). A file written on both
sides keeps both versions in ``/history/files/<path>/`` and shows the later one. Bytes on disk that no
version holds (edited behind the provider's back) are first recorded as a version, so a sync never
overwrites what nobody kept. The paths still to bring on disk are recorded with the batch, so a sync
killed between the commit and the disk finishes that on the next sync of the space.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from afi.errors import AfiError, InvalidPath, TooLarge

from ..tree.file_history import digest_now, keep_before
from ..workspace.history import _check_version
from ..workspace.workspace import is_reserved
from .frame import check_frame
from .peers import record_received

if TYPE_CHECKING:
    from afi.storage.database import Connection

    from ..spaces import Space

__all__ = ["FileBatch", "FilesApplied", "apply_file_batch", "check_out", "newest", "read_file_batch"]

MAX_FILE_CHANGES = 500
MAX_FILE_BATCH_BYTES = 4 * 1024 * 1024  # of blobs, before base64
_VERSION_KEYS = ("path", "sha256", "size", "at", "op")
_PENDING = "sync_checkout:"  # meta key: the paths of a space still to bring on disk


@dataclass
class FileBatch:
    """One batch of a space's file versions, as sent (JSON: ``blobs`` maps a digest to base64 bytes)."""

    store: str
    space: str
    since: int
    upto: int
    more: bool
    versions: list[dict[str, Any]] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "space": self.space, "since": self.since, "upto": self.upto, "more": self.more,
                "versions": self.versions,
                "blobs": {sha: base64.b64encode(data).decode() for sha, data in self.blobs.items()}}  # fmt: skip

    @classmethod
    def from_json(cls, data: Any) -> FileBatch:
        """Given a batch as received, return it with its blobs decoded and checked against their digests;
        InvalidPath naming what is wrong, TooLarge past :data:`MAX_FILE_CHANGES`."""
        since, upto = check_frame(data, what="a file sync batch", items="versions", extra=frozenset({"blobs"}),
                                  cap=MAX_FILE_CHANGES)  # fmt: skip
        if not isinstance(data["blobs"], dict):
            raise InvalidPath("a file sync batch's blobs map digests to base64 bytes")
        blobs: dict[str, bytes] = {}
        for sha, text in data["blobs"].items():
            try:
                raw = base64.b64decode(text, validate=True) if isinstance(text, str) else None
            except (binascii.Error, ValueError):
                raw = None
            if raw is None or hashlib.sha256(raw).hexdigest() != sha:
                raise InvalidPath(f"blobs[{sha[:16]!r}]: not base64 of bytes with that SHA-256")
            blobs[sha] = raw
        return cls(data["store"], data["space"], since, upto, data["more"], data["versions"], blobs)


@dataclass
class FilesApplied:
    """What applying a file batch changed here: versions added, files brought on disk, and the paths
    whose newest version has no kept bytes here (left as they were on disk)."""

    versions: int = 0
    written: int = 0
    removed: int = 0
    unkept: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"versions": self.versions, "written": self.written, "removed": self.removed, "unkept": self.unkept}

    @classmethod
    def from_json(cls, data: Any) -> FilesApplied:
        try:
            unkept = [str(path) for path in data["unkept"]]
            return cls(int(data["versions"]), int(data["written"]), int(data["removed"]), unkept)
        except (KeyError, TypeError, ValueError):
            raise InvalidPath("the peer answered a file apply with something that is not a report of one") from None


def read_file_batch(space: Space, *, store: str, name: str, since: int, peer: str) -> FileBatch:
    """Given a space, return the batch of its file versions after ``since`` for ``peer`` (leaving out
    those that came from it), with the bytes of each kept blob, within :data:`MAX_FILE_BATCH_BYTES`
    (a single version's bytes go alone in a batch of their own when bigger)."""
    database = space.files.database
    with database.read() as conn:
        rows = conn.execute(
            "SELECT id, path, sha256, size, at, op, origin FROM file_versions WHERE space = ? AND id > ? "
            f"ORDER BY id LIMIT {MAX_FILE_CHANGES}",
            (name, since),
        ).fetchall()
    batch = FileBatch(store, name, since, since, more=len(rows) == MAX_FILE_CHANGES)
    # the blobs' sizes first, then the bytes of those the batch takes: two reads a batch, not one a blob
    kept = space.files.kept_sizes(sha for _, _, sha, _, _, _, origin in rows if sha is not None and origin != peer)
    taken: set[str] = set()
    budget = MAX_FILE_BATCH_BYTES
    for id_, path, sha, size, at, op, origin in rows:
        cost = kept[sha] if origin != peer and sha in kept and sha not in taken else None
        if batch.versions and (cost or 0) > budget:
            batch.more = True
            break
        batch.upto = int(id_)
        if origin == peer:
            continue
        batch.versions.append({"path": path, "sha256": sha, "size": int(size), "at": at, "op": op})
        if cost is not None:
            taken.add(sha)
            budget -= cost
    batch.blobs = space.files.blobs(taken)
    return batch


def newest(versions: list[tuple[str | None, int, str, str]]) -> tuple[str | None, int, str, str]:
    """Given a path's versions as ``(sha256, size, at, op)``, return the one every store shows."""
    return max(versions, key=lambda v: (v[2], v[0] or "", v[3]))


def apply_file_batch(space: Space, conn: Connection, batch: FileBatch, *, name: str, label: str) -> FilesApplied:
    """Add a peer's file versions this space lacks and record its ``upto``, in the caller's transaction
    (under the space's write lock); the paths touched are recorded to be brought on disk
    (:func:`check_out`, after the commit). Raises InvalidPath for a version that is not one."""
    checked: list[tuple[str, str | None, int, str, str]] = []
    for index, version in enumerate(batch.versions):
        where = f"versions[{index}]"
        if not isinstance(version, dict) or set(version) != set(_VERSION_KEYS):
            raise InvalidPath(f"{where}: a file version is an object of exactly {', '.join(_VERSION_KEYS)}")
        path, sha, size, at, op = (version[k] for k in _VERSION_KEYS)
        if not isinstance(path, str) or not isinstance(size, int) or isinstance(size, bool) or not isinstance(at, str):
            raise InvalidPath(f"{where}: path and at are strings, size a whole number")
        if sha is not None and not isinstance(sha, str):
            raise InvalidPath(f"{where}: sha256 is 64 hex digits or null")
        try:
            at = _check_version(path, sha, size, at, op)
            if space.workspace.jail.normal(path) != path or is_reserved(path):
                raise InvalidPath(f"not a path a workspace file has: {path!r}")
        except AfiError as err:
            raise InvalidPath(f"{where}: {err.message}") from None
        if at > _latest_allowed():
            raise InvalidPath(f"{where}: at {at} is ahead of this store's clock; check the peer's clock")
        data = batch.blobs.get(sha) if sha is not None else None
        if data is not None and len(data) != size:
            raise InvalidPath(f"{where}: size {size} but its bytes are {len(data)}")
        if size > space.workspace.limits.max_file_bytes:
            raise TooLarge(f"{where}: {path} is {size} bytes, over this store's cap on a workspace file "
                           f"({space.workspace.limits.max_file_bytes} bytes, AFI_MAX_FILE_SIZE)")  # fmt: skip
        checked.append((path, sha, size, at, op))
    applied = FilesApplied()
    touched: set[str] = set()
    for path in sorted({path for path, *_ in checked}):
        _keep_untracked(space, conn, name, path)  # ordered among this side's versions before the peer's come
    for path, sha, size, at, op in checked:
        same = "sha256 IS NULL" if sha is None else "sha256 = ?"
        held = conn.execute(
            f"SELECT 1 FROM file_versions WHERE space = ? AND path = ? AND at = ? AND op = ? AND {same} AND size = ?",
            (name, path, at, op, *([] if sha is None else [sha]), size),
        ).fetchone()
        if held is not None:
            continue
        data = batch.blobs.get(sha) if sha is not None else None
        if data is not None:
            conn.execute("INSERT INTO file_blobs (sha256, size, data) VALUES (?, ?, ?) ON CONFLICT (sha256) DO NOTHING",
                         (sha, len(data), data))  # fmt: skip
        conn.execute(
            "INSERT INTO file_versions (space, path, sha256, size, at, op, origin) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (name, path, sha, size, at, op, batch.store),
        )
        applied.versions += 1
        touched.add(path)
    if touched:
        _add_pending(conn, name, touched)
    record_received(conn, name, batch.store, label, batch.upto, stream="files")
    return applied


def _shas(conn: Connection, name: str, path: str) -> set[str | None]:
    rows = conn.execute("SELECT DISTINCT sha256 FROM file_versions WHERE space = ? AND path = ?", (name, path))
    return {row[0] for row in rows.fetchall()}


def _keep_untracked(space: Space, conn: Connection, name: str, path: str) -> None:
    """Record the bytes on disk at ``path`` when no version of it holds them (edited behind the
    provider's back), stamped as such an edit always is."""
    now = digest_now(space, path)
    if now is not None and now not in _shas(conn, name, path):
        keep_before(space, [path])


def _latest_allowed() -> str:
    from datetime import UTC, datetime, timedelta

    return (datetime.now(UTC) + timedelta(minutes=10)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _add_pending(conn: Connection, name: str, paths: set[str]) -> None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_PENDING + name,)).fetchone()
    pending = set(json.loads(row[0])) if row is not None else set()
    value = json.dumps(sorted(pending | paths))
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                 (_PENDING + name, value))  # fmt: skip


def check_out(space: Space, name: str, applied: FilesApplied | None = None) -> FilesApplied:
    """Bring on disk, for each path a sync recorded as pending, its newest version; call under the
    space's write lock. Bytes on disk that no version holds are recorded as a version first."""
    out = applied or FilesApplied()
    database = space.files.database
    with database.read() as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (_PENDING + name,)).fetchone()
    if row is None:
        return out
    for path in json.loads(row[0]):
        with database.transaction() as conn:
            _keep_untracked(space, conn, name, path)  # edited on disk since the batch committed
            versions = [(s, int(z), str(a), str(o)) for s, z, a, o in conn.execute(
                "SELECT sha256, size, at, op FROM file_versions WHERE space = ? AND path = ?", (name, path)
            ).fetchall()]  # fmt: skip
        if not versions:
            continue
        sha, _size, _at, _op = newest(versions)
        now = digest_now(space, path)
        if now == sha:
            continue
        afi_path = f"/files/{path}"
        if sha is None:
            if now is not None:
                space.workspace.delete(path, afi_path, recursive=False)
                out.removed += 1
            continue
        data = space.files.blobs([sha]).get(sha)
        if data is None:
            out.unkept.append(path)
            continue
        space.workspace.write(path, afi_path, data, offset=None, append=False, create_only=False)
        out.written += 1
    with database.transaction() as conn:
        conn.execute("DELETE FROM meta WHERE key = ? AND value = ?", (_PENDING + name, row[0]))
    return out
