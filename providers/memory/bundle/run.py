"""``afi export`` and ``afi import`` of a bundle: the spaces of a store, through the provider's verbs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from afi.errors import InvalidPath, NotFound
from afi.provider import Caller
from afi.storage.database import open_database

from ..claims import SpaceClaim
from ..spaces import check_space_name
from ..tree.at import instant
from .apply import Prepared, check_empty, discard, prepare, store_holds_nothing
from .collect import store_spaces
from .read import BundleReader
from .write import BundleWriter, Progress

if TYPE_CHECKING:
    from ..provider import MemoryProvider

__all__ = ["ImportResult", "export_bundle", "import_bundle"]

Owner = Callable[[str], Caller]


def _quiet(what: str, done: int, total: int) -> None:
    return None


def export_bundle(provider: MemoryProvider, out: Path, owner: Owner, *, spaces: list[str] | None = None,
                  as_of: str | None = None, progress: Progress | None = None) -> dict[str, Any]:  # fmt: skip
    """Write the store's spaces (or those named) as a bundle at ``out``; return its manifest.

    Raises:
        NotFound: a named space holds nothing.
        InvalidPath: ``as_of`` is not an ISO 8601 instant.
        Conflict: ``out`` exists and is not an empty folder.
    """
    at = None if as_of is None else instant(as_of, "--as-of")
    held = store_spaces(open_database(provider.db), provider.root)
    for name in spaces or []:
        if name not in held:
            raise NotFound(f"the store holds nothing in space {name!r} (it has: {', '.join(held) or 'none'})")
    names = spaces if spaces is not None else held
    embedder = provider.fabric(names[0] if names else "default").memory.embedder
    writer = BundleWriter(out, embedder={"name": embedder.name, "dims": embedder.dims}, as_of=at,
                          progress=progress)  # fmt: skip
    try:
        for name in names:
            provider.export_space(owner(name), at, writer.add_space)
        return writer.finish()
    except BaseException:
        writer.abort()
        raise


@dataclass
class ImportResult:
    """What an import wrote: per target space, the counts of what it holds now."""

    embedder: str
    bundle_embedder: str
    spaces: dict[str, dict[str, int]] = field(default_factory=dict)

    def summary(self) -> str:
        lines = []
        for name, counts in self.spaces.items():
            said = ", ".join(f"{n} {what.replace('_', ' ')}" for what, n in counts.items() if n)
            lines.append(f"imported space {name}: {said or 'nothing'}")
        same = (
            "the bundle's own" if self.embedder == self.bundle_embedder else f"not the bundle's {self.bundle_embedder}"
        )
        lines.append(f"vectors computed again with {self.embedder} ({same})")
        return "\n".join(lines)


def import_bundle(provider: MemoryProvider, path: Path, owner: Owner, *, space: str | None = None,
                  progress: Progress | None = None) -> ImportResult:  # fmt: skip
    """Import a bundle into empty spaces: every space under its own name, or with ``space``, the
    bundle's only space under that name (or, of several, the one of that name).

    The whole bundle is checked before anything is written; then all its spaces go in one transaction.

    Raises:
        InvalidPath / Unsupported: the bundle is not whole, not this format, or a record is broken.
        Conflict: a target space is not empty.
    """
    report = progress or _quiet
    if not path.is_dir():
        raise InvalidPath("a bundle is a folder (afi export -o FOLDER)", path=str(path))
    limits = provider.fabric("default").memory.limits  # every space of a store has the same caps
    reader = BundleReader(path, report, limits=limits, files=provider.workspace_limits)
    names = sorted(reader.manifest["spaces"])
    only = space if space is not None and (len(names) != 1 or space in names) else None
    datas = reader.spaces(only)
    if space is not None and len(datas) == 1:
        datas[0].name = space
    database = open_database(provider.db)
    for data in datas:
        check_space_name(data.name)
    claims = [SpaceClaim(provider.root, data.name, database) for data in datas]
    prepared: list[Prepared] = []
    try:
        for claim in claims:  # what an import killed mid-way left is undone first
            claim.take(partial(store_holds_nothing, database, claim.space))
        for data in datas:
            check_empty(database, data.name, provider.root)
        bundle_embedder = str(reader.manifest["embedder"].get("name"))
        result = ImportResult("", bundle_embedder)
        for data, claim in zip(datas, claims, strict=True):
            embedder = provider.fabric(data.name).memory.embedder
            result.embedder = embedder.name
            prepared.append(prepare(data, embedder, provider.root, report, claim.note))
        provider.import_spaces([(owner(data.name), ready) for data, ready in zip(datas, prepared, strict=True)])
        for data in datas:
            result.spaces[data.name] = data.counts()
    finally:
        for ready in prepared:
            discard(ready)
        for claim in claims:
            claim.release()
    return result
