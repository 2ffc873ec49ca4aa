"""``afi doctor``: what this install and this store can do, each part checked for real.

Nothing is created, migrated or changed: the store is read (its schema and the embedder it records),
the embedder in use embeds one sentence, and the mount's and SSH's system parts are looked for.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from afi import __version__
from afi.errors import AfiError
from afi.providers.memory.fabric.choice import EmbedderChoice
from afi.providers.memory.fabric.embedders import Embedder
from afi.storage.database import store_label
from afi.storage.peek import peek_meta, peek_notes_without_vectors

__all__ = ["Check", "run_checks"]

Status = Literal["ok", "warning", "problem"]
PROBE = "afi doctor checks that the embedder turns a sentence into a vector"


@dataclass(frozen=True)
class Check:
    """One part checked: its name, how it stands and what was found."""

    name: str
    status: Status
    detail: str

    def as_json(self) -> dict[str, str]:
        return asdict(self)


def run_checks(db: Path | str, root: Path, choice: EmbedderChoice) -> list[Check]:
    """Given the store, its workspace root and the embedder choice the ``afi`` command would make,
    return every check, in the order they are shown."""
    checks = [Check("afi", "ok", f"afi-memory {__version__} on Python {platform.python_version()} ({sys.executable})")]
    checks.append(_store(db))
    checks.append(_root(root))
    embedder, check = _embedder(db, choice)
    checks.append(check)
    if embedder is not None:
        checks.append(_embeds(embedder))
    checks.extend([_fuse(), _ssh()])
    return checks


def _store(db: Path | str) -> Check:
    from afi.app.db import store_status

    try:
        found = store_status(db)
    except (AfiError, OSError) as err:
        return Check("store", "problem", f"{store_label(db)}: {err}")
    if not found.exists:
        return Check("store", "ok", f"{store_label(db)} (not created yet: the first command that writes makes it)")
    if found.newer:
        return Check("store", "problem", f"{store_label(db)}: schema {found.version} is newer than this afi knows "
                                         f"({found.latest}): upgrade afi-memory")  # fmt: skip
    if found.pending:
        return Check("store", "warning", f"{store_label(db)}: schema {found.version} of {found.latest}; the next "
                                         "command that opens it migrates it (or afi db migrate)")  # fmt: skip
    return Check("store", "ok", f"{store_label(db)}: schema {found.version}, up to date")


def _root(root: Path) -> Check:
    if not root.exists():
        return Check("workspace root", "ok", f"{root} (made at first use)")
    if not root.is_dir() or not os.access(root, os.W_OK | os.X_OK):
        return Check("workspace root", "problem", f"{root} is not a folder this user can write in")
    return Check("workspace root", "ok", str(root))


def _recorded(db: Path | str) -> tuple[str, int] | None:
    name = peek_meta(db, "embedder", since_step=0, before="")
    dims = peek_meta(db, "dims", since_step=0, before="")
    return (name, int(dims)) if name and dims and dims.isdigit() else None


def _embedder(db: Path | str, choice: EmbedderChoice) -> tuple[Embedder | None, Check]:
    """The embedder the ``afi`` command would open the store with, and whether the store takes it."""
    try:
        recorded = _recorded(db)
        embedder = choice.for_record(recorded)
    except (AfiError, OSError) as err:
        return None, Check("embedder", "problem", str(err))
    if recorded is None:
        return embedder, Check("embedder", "ok", f"{embedder.name} ({embedder.dims} dims): a new store gets it")
    if (embedder.name, embedder.dims) != recorded:
        return None, Check("embedder", "problem", f"the store's vectors come from {recorded[0]} ({recorded[1]} dims) "
                           f"but {embedder.name} is asked for (AFI_EMBEDDER or --embedder): the store refuses it; "
                           f"afi db reembed --embedder {choice.named} moves the store over")  # fmt: skip
    waiting = peek_notes_without_vectors(db)
    later = (f"; {waiting} notes wait for their vectors (made by the next write or recall of their space: "
             "until then they are found by their words)") if waiting else ""  # fmt: skip
    return embedder, Check("embedder", "ok", f"{embedder.name} ({embedder.dims} dims), as the store records{later}")


def _embeds(embedder: Embedder) -> Check:
    """Embed one sentence, as recall does (a model loads here: its files are checked first)."""
    started = time.perf_counter()
    try:
        vector = embedder.embed([PROBE])
    except (AfiError, OSError, RuntimeError) as err:
        return Check("embeds", "problem", f"{embedder.name}: {err}")
    took = (time.perf_counter() - started) * 1000
    where = getattr(embedder, "model_path", None)
    model = f" (loading the model, {where}, its SHA-256 checked)" if where is not None else ""
    return Check("embeds", "ok", f"{embedder.name}: one sentence to {vector.shape[1]} dims in {took:.0f} ms{model}")


def _fuse() -> Check:
    device, helper = Path("/dev/fuse"), shutil.which("fusermount3")
    if device.exists() and helper is not None:
        return Check("afi mount", "ok", f"/dev/fuse and {helper}")
    missing = [name for name, there in (("/dev/fuse", device.exists()), ("fusermount3", helper)) if not there]
    return Check("afi mount", "warning", f"{' and '.join(missing)} not found: afi mount needs FUSE 3 "
                                         "(Debian: apt install fuse3); every other door works")  # fmt: skip


def _ssh() -> Check:
    client = shutil.which("ssh")
    if client is None:
        return Check("ssh client", "warning", "no ssh on PATH: afi ssh serves, but this machine cannot be its client")
    return Check("ssh client", "ok", client)
