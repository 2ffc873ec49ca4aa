"""Write spaces (:class:`~.model.SpaceData`) as a bundle folder, its manifest last.

The folder is built beside its destination under a temporary name and renamed into place once
whole, so a failed export leaves no half bundle. Every file's SHA-256 is taken from the bytes as they
are written, and the manifest lists them all.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from afi.errors import Conflict, InvalidPath

from ..fabric.working import BLOCK_LABEL
from .layout import FORMAT, MANIFEST, VERSION, dump_json, dump_line, session_file, space_dir
from .markdown import block_to_markdown, is_plain_block, note_to_markdown
from .model import FileEntry, SpaceData

__all__ = ["BundleWriter", "Progress"]

Progress = Callable[[str, int, int], None]  # (what, done, total)


class BundleWriter:
    """A bundle being written: add spaces, then ``finish`` writes the manifest and moves it into place."""

    def __init__(self, out: Path, *, embedder: dict[str, Any], as_of: str | None,
                 progress: Progress | None = None) -> None:  # fmt: skip
        if out.exists() and not out.is_dir():
            raise Conflict("a file of that name exists: name a new folder for the bundle", path=str(out))
        if out.exists() and any(out.iterdir()):
            raise Conflict("the bundle's folder exists and is not empty: name a new folder", path=str(out))
        if not out.parent.is_dir():
            raise InvalidPath("the bundle's parent folder does not exist", path=str(out))
        self.out = out
        self.tmp = out.parent / f".{out.name}.partial-{uuid.uuid4().hex[:8]}"
        try:
            self.tmp.mkdir()
        except OSError as err:
            raise InvalidPath(f"cannot write the bundle there: {err.strerror}", path=str(out)) from None
        self.embedder, self.as_of = embedder, as_of
        self.progress = progress or (lambda what, done, total: None)
        self.checksums: dict[str, str] = {}
        self.counts: dict[str, dict[str, int]] = {}
        self.blobs: dict[str, Callable[[], bytes]] = {}

    def _put(self, rel: str, data: bytes) -> None:
        target = self.tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        self.checksums[rel] = hashlib.sha256(data).hexdigest()

    def _copy(self, rel: str, entry: FileEntry) -> None:
        target = self.tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        if isinstance(entry.source, Path):
            with entry.source.open("rb") as src, target.open("wb") as dst:
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    digest.update(chunk)
                    dst.write(chunk)
        else:
            assert entry.source is not None
            data = entry.source()
            digest.update(data)
            target.write_bytes(data)
        if digest.hexdigest() != entry.sha256:
            raise Conflict("the file changed while it was exported: export again", path=f"/files/{entry.path}")
        self.checksums[rel] = digest.hexdigest()

    def add_space(self, data: SpaceData) -> None:
        """Write one space's files."""
        base = space_dir(data.name)
        total = len(data.notes) + len(data.sessions) + len(data.files.entries)
        done = 0
        for order, note in enumerate(data.notes, 1):
            self._put(f"{base}/notes/{note.id}.md", note_to_markdown(note, order))
            done += 1
            if done % 200 == 0:
                self.progress(f"export {data.name}", done, total)
        state: dict[str, Any] = {"working": self._working(base, data)}
        if data.horizon is not None:
            state["gc_horizon"] = data.horizon
        self._put(f"{base}/space.json", dump_json(state))
        self._put(f"{base}/lineage.json", dump_json(
            [{"entry_id": e, "status": s, "changed_at": c} for e, s, c in data.lineage]))  # fmt: skip
        self._put(f"{base}/snapshots.json", dump_json(
            [{"name": n, "at": a, "created_at": c} for n, a, c in data.snapshots]))  # fmt: skip
        for session in data.sessions:
            lines = [dump_line({"session": session.session_id, "created_at": session.created_at})]
            lines += [dump_line(entry) for entry in session.entries]
            self._put(f"{base}/ledger/{session_file(session.session_id)}", "".join(lines).encode())
            done += 1
        files = [f for f in data.files.entries if f.kind == "file"]
        index = {
            "files": [{"path": f.path, "size": f.size, "mtime_ns": f.mtime_ns, "sha256": f.sha256} for f in files],
            "folders": [{"path": f.path, "mtime_ns": f.mtime_ns} for f in data.files.entries if f.kind == "folder"],
        }
        self._put(f"{base}/files/index.json", dump_json(index))
        for entry in files:
            self._copy(f"{base}/files/current/{entry.path}", entry)
            done += 1
            self.progress(f"export {data.name}", done, total)
        if data.files.versions:
            lines = [dump_line({"order": v.order, "path": v.path, "sha256": v.sha256, "size": v.size, "at": v.at,
                                "op": v.op}) for v in data.files.versions]  # fmt: skip
            self._put(f"{base}/files/versions.jsonl", "".join(lines).encode())
        self.blobs.update(data.files.blobs)
        self.counts[data.name] = data.counts()
        self.progress(f"export {data.name}", total, total)

    def _working(self, base: str, data: SpaceData) -> dict[str, Any] | None:
        """Write the plain blocks as Markdown; return what ``space.json`` keeps of the working value."""
        if data.working_version == 0:
            return None
        value = dict(data.working_value)
        fabric = value.get("_fabric")
        blocks = fabric.get("blocks") if isinstance(fabric, dict) else None
        if isinstance(fabric, dict) and isinstance(blocks, dict):
            kept = {}
            for label, raw in blocks.items():
                if isinstance(label, str) and BLOCK_LABEL.match(label) and is_plain_block(raw):
                    self._put(f"{base}/working/{label}.md", block_to_markdown(raw))
                else:
                    kept[label] = raw
            value["_fabric"] = {**fabric, "blocks": kept}
        return {"version": data.working_version, "value": value}

    def finish(self) -> dict[str, Any]:
        """Write the kept blobs and the manifest, move the bundle into place; return the manifest."""
        for n, (sha, read) in enumerate(sorted(self.blobs.items()), 1):
            self._put(f"blobs/{sha}", read())
            if self.checksums[f"blobs/{sha}"] != sha:
                raise Conflict(f"the kept bytes of version {sha[:12]}… do not match their hash", path=f"blobs/{sha}")
            self.progress("export blobs", n, len(self.blobs))
        checksums = dict(sorted(self.checksums.items()))
        manifest: dict[str, Any] = {"format": FORMAT, "version": VERSION, "embedder": self.embedder,
                                    "spaces": self.counts, "checksums": checksums}  # fmt: skip
        if self.as_of is not None:
            manifest["as_of"] = self.as_of
        (self.tmp / MANIFEST).write_bytes(dump_json(manifest))
        if self.out.exists():
            self.out.rmdir()
        self.tmp.rename(self.out)
        return manifest

    def abort(self) -> None:
        """Remove the half-written bundle."""
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self.tmp)
