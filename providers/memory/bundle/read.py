"""Read a bundle folder back into spaces (:class:`~.model.SpaceData`), checking all of it first.

Nothing is trusted: the manifest names the format and version this code reads, every file's SHA-256
matches the manifest's, no file is there that the manifest does not list (a top-level dot folder
such as ``.git`` aside), no file is a link (symbolic or hard), every record parses, the counts agree,
and nothing is over the target store's caps (a note's fields, a workspace file's size by the bytes it
reads as, holes included, and a space's quota). Each refusal is an AfiError naming the file (and the
line or field) at fault; nothing has been written by then.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from afi.errors import InvalidPath, TooLarge, Unsupported

from ..fabric.memory import MemoryLimits
from ..fabric.rows import iso_now
from ..fabric.working import BLOCK_LABEL
from ..spaces import SPACE_NAME
from ..workspace.file_index import TEMP_PREFIX
from ..workspace.quota import WorkspaceLimits, format_size
from .checks import (
    check_blob_name,
    check_entry,
    check_instant,
    check_mtime,
    check_note,
    check_session_id,
    check_snapshot,  # fmt: skip
    check_version,
    loads,
    refuse_links,
)
from .layout import FORMAT, MANIFEST, NOTE_ID, SHA256, VERSION, file_sha256, session_file, session_from_file
from .markdown import block_from_markdown, note_from_markdown
from .model import FileEntry, FileVersion, LedgerSessionData, SpaceData
from .write import Progress

__all__ = ["BundleReader", "read_manifest"]

_ENTRY_KEYS = {"pos", "mpos", "entry_id", "type", "role", "text", "timestamp", "ref", "data"}


def read_manifest(root: Path) -> dict[str, Any]:
    """The bundle's manifest, checked for its format and version."""
    path = root / MANIFEST
    if not path.is_file():
        raise InvalidPath("manifest.json is missing: this folder is not a whole afi bundle", path=str(path))
    manifest = loads(path.read_bytes(), str(path), "manifest.json: ")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        said = (
            f"names the format {manifest['format']!r}"
            if isinstance(manifest, dict) and "format" in manifest
            else ("names no format")
        )
        raise InvalidPath(f"manifest.json {said}: this afi reads bundles of the format {FORMAT!r} only",
                          path=str(path))  # fmt: skip
    version = manifest.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
        raise Unsupported(f"this bundle is format version {version}, and this afi reads version {VERSION}: "
                          "upgrade afi-memory to import it", path=str(path))  # fmt: skip
    if version != VERSION:
        raise InvalidPath(f"unknown bundle format version {version!r} (this afi reads {VERSION})", path=str(path))
    for key, kind in (("checksums", dict), ("spaces", dict), ("embedder", dict)):
        if not isinstance(manifest.get(key), kind):
            raise InvalidPath(f"manifest.json has no {key} mapping", path=str(path))
    return manifest


class BundleReader:
    """A bundle on disk, read and checked whole by :meth:`spaces`."""

    def __init__(self, root: Path, progress: Progress | None = None, *, limits: MemoryLimits | None = None,
                 files: WorkspaceLimits | None = None) -> None:  # fmt: skip
        self.root = root
        self.progress = progress or (lambda what, done, total: None)
        self.limits = limits or MemoryLimits()  # the target store's caps
        self.files = files or WorkspaceLimits()
        self.manifest = read_manifest(root)
        self.checksums: dict[str, str] = self.manifest["checksums"]

    def _where(self, rel: str) -> str:
        return str(self.root / rel)

    def check_files(self) -> None:
        """Every file listed and matching its checksum, none besides, no link, and no workspace file or
        space over the caps (checked before a byte is hashed)."""
        present: set[str] = set()
        used: dict[str, int] = {}  # space -> bytes of its current workspace files
        for folder, dirs, names in os.walk(self.root):
            rel = os.path.relpath(folder, self.root)
            if rel == ".":
                dirs[:] = [d for d in dirs if not d.startswith(".")]
            names = [n for n in names if not (rel == "." and n.startswith("."))]
            refuse_links(folder, dirs)
            prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
            for name, st in zip(names, refuse_links(folder, names), strict=True):
                self._check_size(prefix + name, st.st_size, used)
            present.update(prefix + n for n in names)
        present.discard(MANIFEST)
        for rel in sorted(present - set(self.checksums)):
            raise InvalidPath("this file is not in the manifest's checksums: was the bundle changed?",
                              path=self._where(rel))  # fmt: skip
        for n, (rel, expected) in enumerate(sorted(self.checksums.items()), 1):
            if rel not in present:
                raise InvalidPath("this file is in the manifest but missing from the bundle", path=self._where(rel))
            if file_sha256(self.root / rel) != expected:
                raise InvalidPath("checksum mismatch: the file's bytes are not those the manifest names",
                                  path=self._where(rel))  # fmt: skip
            if rel.startswith("blobs/"):
                check_blob_name(rel, expected, self._where(rel))
            if n % 100 == 0 or n == len(self.checksums):
                self.progress("check", n, len(self.checksums))

    def _check_size(self, rel: str, size: int, used: dict[str, int]) -> None:
        """A workspace file (or a kept version's blob) over the file cap, or a space's files over its quota,
        is refused: an import keeps the limits every write keeps (a sparse file counts by the bytes it reads as)."""
        parts = rel.split("/")
        current = len(parts) > 4 and parts[0] == "spaces" and parts[2:4] == ["files", "current"]
        if not current and parts[0] != "blobs":
            return
        cap = self.files.max_file_bytes
        if size > cap:
            raise TooLarge(f"{format_size(size)}, over the workspace file cap of {format_size(cap)} "
                           "(AFI_MAX_FILE_SIZE)", path=self._where(rel))  # fmt: skip
        if current:
            used[parts[1]] = used.get(parts[1], 0) + size
            quota = self.files.space_quota_bytes
            if used[parts[1]] > quota:
                raise TooLarge(f"the workspace files of space {parts[1]!r} pass its quota of {format_size(quota)} "
                               "(AFI_SPACE_QUOTA)", path=self._where(rel))  # fmt: skip

    def spaces(self, only: str | None = None) -> list[SpaceData]:
        """Every space of the bundle (or the one named), parsed and checked."""
        self.check_files()
        names = sorted(self.manifest["spaces"])
        for name in names:
            if not SPACE_NAME.match(name):
                raise InvalidPath(f"the manifest names an invalid space {name!r}", path=self._where(MANIFEST))
        if only is not None:
            if only not in names:
                raise InvalidPath(f"the bundle holds no space {only!r} (it holds {', '.join(names) or 'none'})",
                                  path=str(self.root))  # fmt: skip
            names = [only]
        return [self._space(name) for name in names]

    def _json(self, rel: str) -> Any:
        try:
            data = (self.root / rel).read_bytes()
        except FileNotFoundError:
            raise InvalidPath("this file is missing from the bundle", path=self._where(rel)) from None
        return loads(data, self._where(rel))

    def _listed(self, prefix: str) -> list[str]:
        return sorted(rel for rel in self.checksums if rel.startswith(prefix))

    def _space(self, name: str) -> SpaceData:
        base = f"spaces/{name}"
        data = SpaceData(name)
        ordered: list[tuple[int, Any]] = []
        for rel in self._listed(f"{base}/notes/"):
            file_id = rel.rsplit("/", 1)[1].removesuffix(".md")
            if not rel.endswith(".md") or not NOTE_ID.match(file_id):
                raise InvalidPath("a note file is named <12 hex id>.md", path=self._where(rel))
            ordered.append(note_from_markdown((self.root / rel).read_bytes(), self._where(rel), file_id))
            check_note(ordered[-1][1], self._where(rel), self.limits)
        orders = [o for o, _ in ordered]
        if sorted(orders) != list(range(1, len(orders) + 1)):
            raise InvalidPath("the notes' order fields are not 1, 2, … once each", path=self._where(f"{base}/notes"))
        data.notes = [note for _, note in sorted(ordered, key=lambda pair: pair[0])]
        self._working(base, data)
        data.lineage = [(r["entry_id"], r["status"], check_instant(r["changed_at"], "changed_at", self._where(
                        f"{base}/lineage.json"))) for r in self._records(f"{base}/lineage.json",
                        ("entry_id", "status", "changed_at"))]  # fmt: skip
        data.snapshots = [(r["name"], r["at"], r["created_at"]) for r in
                          self._records(f"{base}/snapshots.json", ("name", "at", "created_at"))]  # fmt: skip
        for row in data.snapshots:
            check_snapshot(*row, self._where(f"{base}/snapshots.json"))
        data.sessions = [self._session(rel) for rel in self._listed(f"{base}/ledger/")]
        self._files(base, data)
        counts = data.counts()
        said = self.manifest["spaces"][name]
        if said != counts:
            raise InvalidPath(f"the manifest's counts for space {name!r} ({said}) are not what it holds ({counts})",
                              path=self._where(MANIFEST))  # fmt: skip
        return data

    def _records(self, rel: str, keys: tuple[str, ...]) -> list[dict[str, str]]:
        rows = self._json(rel)
        if not isinstance(rows, list):
            raise InvalidPath("expected a JSON list", path=self._where(rel))
        for n, row in enumerate(rows):
            if not isinstance(row, dict) or set(row) != set(keys) or not all(isinstance(v, str) for v in row.values()):
                raise InvalidPath(f"record {n}: expected the text fields {', '.join(keys)}", path=self._where(rel))
        return rows

    def _working(self, base: str, data: SpaceData) -> None:
        state = self._json(f"{base}/space.json")
        if isinstance(state, dict) and "gc_horizon" in state:
            where = self._where(f"{base}/space.json")
            data.horizon = check_instant(state["gc_horizon"], "space.json: gc_horizon", where)
            if data.horizon > iso_now():  # a horizon only rises: a future one would close the space's past for good
                raise InvalidPath("space.json: gc_horizon is later than now, where no gc can have cut", path=where)
        working = state.get("working") if isinstance(state, dict) else None
        blocks = self._listed(f"{base}/working/")
        if working is None:
            if blocks or not isinstance(state, dict) or "working" not in state:
                raise InvalidPath("space.json: working must be null (no working value) or {version, value}",
                                  path=self._where(f"{base}/space.json"))  # fmt: skip
            return
        version, value = working.get("version"), working.get("value")
        if not isinstance(version, int) or version < 1 or not isinstance(value, dict):
            raise InvalidPath("space.json: working needs a positive version and a value mapping",
                              path=self._where(f"{base}/space.json"))  # fmt: skip
        fabric = value.get("_fabric")
        kept = fabric.get("blocks") if isinstance(fabric, dict) else None
        if blocks and not isinstance(kept, dict):
            raise InvalidPath("space.json: blocks are in working/ but the value has no _fabric.blocks",
                              path=self._where(f"{base}/space.json"))  # fmt: skip
        for rel in blocks:
            label = rel.rsplit("/", 1)[1].removesuffix(".md")
            if not rel.endswith(".md") or not BLOCK_LABEL.match(label):
                raise InvalidPath("a block file is named <label>.md, the label [a-z0-9][a-z0-9._-]*",
                                  path=self._where(rel))  # fmt: skip
            assert isinstance(kept, dict)
            kept[label] = block_from_markdown((self.root / rel).read_bytes(), self._where(rel))
            content, cap = kept[label]["content"], self.limits.max_entry_text_chars
            if len(content) > cap:
                raise TooLarge(f"content has {len(content)} characters; the cap is {cap} (max_entry_text_chars)",
                               path=self._where(rel))  # fmt: skip
        data.working_version, data.working_value = version, value

    def _lines(self, rel: str) -> list[tuple[int, dict[str, Any]]]:
        out = []
        for n, line in enumerate((self.root / rel).read_bytes().split(b"\n")[:-1], 1):
            record = loads(line, self._where(rel), f"line {n}: ")
            if not isinstance(record, dict):
                raise InvalidPath(f"line {n}: expected a JSON object", path=self._where(rel))
            out.append((n, record))
        return out

    def _session(self, rel: str) -> LedgerSessionData:
        lines = self._lines(rel)
        if not lines or set(lines[0][1]) != {"session", "created_at"}:
            raise InvalidPath("line 1: expected the session header {session, created_at}", path=self._where(rel))
        header = lines[0][1]
        check_session_id(header["session"], self._where(rel))
        check_instant(header["created_at"], "line 1: created_at", self._where(rel))
        if session_file(str(header["session"])) != rel.rsplit("/", 1)[1]:
            raise InvalidPath(f"line 1: session {header['session']!r} is not the one the file name says "
                              f"({session_from_file(rel.rsplit('/', 1)[1])!r})", path=self._where(rel))  # fmt: skip
        entries = []
        for n, entry in lines[1:]:
            if set(entry) != _ENTRY_KEYS or not isinstance(entry["pos"], int) or not isinstance(entry["data"], dict):
                raise InvalidPath(f"line {n}: expected an entry {{{', '.join(sorted(_ENTRY_KEYS))}}}",
                                  path=self._where(rel))  # fmt: skip
            for key in ("entry_id", "type", "text", "timestamp", "role", "ref"):
                if not isinstance(entry[key], str) and not (key in ("role", "ref") and entry[key] is None):
                    raise InvalidPath(f"line {n}: {key} must be text", path=self._where(rel))
            if entry["mpos"] is not None and not isinstance(entry["mpos"], int):
                raise InvalidPath(f"line {n}: mpos must be a number or null", path=self._where(rel))
            check_entry(entry, n, self._where(rel))
            entries.append(entry)
        return LedgerSessionData(str(header["session"]), str(header["created_at"]), entries)

    def _files(self, base: str, data: SpaceData) -> None:
        rel = f"{base}/files/index.json"
        index = self._json(rel)
        try:
            for f in index["folders"]:
                data.files.entries.append(FileEntry(_safe(f["path"]), "folder", check_mtime(f["mtime_ns"])))
            for f in index["files"]:
                current = f"{base}/files/current/{_safe(f['path'])}"
                if self.checksums.get(current) != f["sha256"]:
                    raise InvalidPath(f"the file {f['path']} is not in the bundle as the index says",
                                      path=self._where(current))  # fmt: skip
                data.files.entries.append(FileEntry(f["path"], "file", check_mtime(f["mtime_ns"]), int(f["size"]),
                                                    f["sha256"], self.root / current))  # fmt: skip
        except (KeyError, TypeError, ValueError) as err:
            raise InvalidPath(f"expected {{files: [{{path, size, mtime_ns, sha256}}], folders: [{{path, mtime_ns}}]}} "
                              f"({err!r})", path=self._where(rel)) from None  # fmt: skip
        data.files.entries.sort(key=lambda f: f.path)
        listed = {f"{base}/files/current/{f.path}" for f in data.files.entries if f.kind == "file"}
        for extra in sorted(set(self._listed(f"{base}/files/current/")) - listed):
            raise InvalidPath("this file is not in files/index.json", path=self._where(extra))
        versions = f"{base}/files/versions.jsonl"
        if versions in self.checksums:
            for n, v in self._lines(versions):
                try:
                    data.files.versions.append(FileVersion(int(v["order"]), _safe(v["path"]), v["sha256"],
                                                           int(v["size"]), str(v["at"]), str(v["op"])))  # fmt: skip
                except (KeyError, TypeError, ValueError) as err:
                    raise InvalidPath(f"line {n}: expected a version {{order, path, sha256, size, at, op}} ({err!r})",
                                      path=self._where(versions)) from None  # fmt: skip
        for n, version in enumerate(data.files.versions, 1):
            sha = version.sha256
            if sha is not None and (not isinstance(sha, str) or not SHA256.match(sha)):
                raise InvalidPath(f"version {version.order}: sha256 must be 64 hex digits", path=self._where(versions))
            check_version(version, n, self._where(versions))
            if sha is not None and f"blobs/{sha}" in self.checksums:
                if (self.root / "blobs" / sha).stat().st_size != version.size:
                    raise InvalidPath(f"line {n}: size {version.size} is not the size of the blob it names",
                                      path=self._where(versions))  # fmt: skip
                data.files.blobs[sha] = (self.root / "blobs" / sha).read_bytes


def _safe(path: Any) -> str:
    """A workspace path from the bundle: relative, no empty, ``.`` or ``..`` part, no temporary name."""
    if not isinstance(path, str) or not path or path.startswith("/") or "\x00" in path:
        raise ValueError(f"not a workspace path: {path!r}")
    parts = path.split("/")
    if any(p in ("", ".", "..") or p.startswith(TEMP_PREFIX) for p in parts):
        raise ValueError(f"not a workspace path: {path!r}")
    return path
