"""``/history/files/<path>/<version>``: every kept version of every workspace file, read-only.

``/history/files`` mirrors the workspace's folders; each file that has versions is a folder of
them, named by their instant: ``2026-12-01T10:00:00.000Z`` (the bytes the file held from then on),
``…Z.deleted`` or ``…Z.moved-away`` (it was absent from then on: an empty file). Two versions of
one instant (the same millisecond) are told apart by their row id (``…Z~42``). A path that was
once a file and later a folder shows both its versions and its children.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from afi.errors import InvalidPath, NotFound
from afi.model import Entry, Page, ReadResult

from ..workspace.history import FileVersion
from .at_files import Held, held_entry, read_only_dir, slice_read
from .base import Listing

if TYPE_CHECKING:
    from ..spaces import Space

__all__ = ["FILES_DIR", "history_file_candidates", "history_files_list", "history_files_read",
           "history_files_stat", "named_versions"]  # fmt: skip

FILES_DIR = "/history/files"
_ABSENT = {"delete": ".deleted", "move": ".moved-away"}


def named_versions(versions: list[FileVersion]) -> list[tuple[str, FileVersion]]:
    """Each version of one path with its name in its folder, oldest first."""
    seen: dict[str, int] = {}
    for version in versions:
        seen[version.at] = seen.get(version.at, 0) + 1
    named = []
    for version in versions:
        stem = version.at if seen[version.at] == 1 else f"{version.at}~{version.id}"
        named.append((stem + ("" if version.present else _ABSENT.get(version.op, ".deleted")), version))
    return named


def _held(version: FileVersion) -> Held:
    return Held(version.path, version.size, version.at, version.sha256)


def _entry(path: str, version: FileVersion) -> Entry:
    extra: dict[str, object] = {"x-op": version.op, "x-version": version.id}
    if version.sha256:
        extra["x-sha256"] = version.sha256
    return held_entry(path, _held(version), **extra)


def _version_at(space: Space, rel: str) -> FileVersion | None:
    """The version ``rel`` names (``<file path>/<version name>``), if it names one."""
    parent, _, name = rel.rpartition("/")
    if not parent or name[:1] not in "0123456789":
        return None
    return dict(named_versions(space.files.versions(parent))).get(name)


def _children(paths: list[str], rel: str) -> list[str]:
    prefix = f"{rel}/" if rel else ""
    return sorted({p[len(prefix) :].partition("/")[0] for p in paths if p.startswith(prefix)})


def history_files_stat(space: Space, rel: str, path: str) -> Entry:
    if not rel:
        return read_only_dir(path, None)
    version = _version_at(space, rel)
    if version is not None:
        return _entry(path, version)
    paths = space.files.paths()
    if rel in paths or _children(paths, rel):
        return read_only_dir(path, None)
    raise NotFound("no kept versions of such a file", path=path)


def history_files_list(space: Space, rel: str, path: str, listing: Listing) -> Page:
    if rel and _version_at(space, rel) is not None:
        raise InvalidPath("this is a file, not a folder: read it instead of listing it", path=path)
    paths = space.files.paths()
    entries = [_entry(f"{path}/{name}", v) for name, v in named_versions(space.files.versions(rel))] if rel else []
    entries += [read_only_dir(f"{path}/{child}", None) for child in _children(paths, rel)]
    if rel and not entries:
        raise NotFound("no kept versions of such a file", path=path)
    entries.sort(key=lambda e: e.path)
    return listing.page(entries)


def history_files_read(space: Space, rel: str, path: str, offset: int, length: int | None) -> ReadResult:
    version = _version_at(space, rel) if rel else None
    if version is None:
        history_files_stat(space, rel, path)  # not_found when there is nothing
        raise InvalidPath("this is a folder of versions: list it, then read one", path=path)
    data = b"" if version.sha256 is None else space.files.blob(version.sha256, path=path)
    return slice_read(_entry(path, version), data, offset, length)


def history_file_candidates(space: Space) -> Iterator[tuple[str, str, object]]:
    """Grep's candidates under ``/history/files``: every kept version that holds bytes."""
    by_path: dict[str, list[FileVersion]] = {}
    for version in space.files.all_versions():
        by_path.setdefault(version.path, []).append(version)
    for rel in sorted(by_path):
        ordered = sorted(by_path[rel], key=lambda v: (v.at, v.id))
        for name, version in named_versions(ordered):
            if version.present:
                yield f"{FILES_DIR}/{rel}/{name}", "version", _held(version)
