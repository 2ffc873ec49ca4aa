"""``afi mount``: the memory provider shown as a directory through the FUSE binding."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path

from afi import config
from afi.auth.keys import LOCAL_OWNER
from afi.bindings.fuse import AfiFS, HeldFolder, MountError, check_mountpoint, serve_mount
from afi.config import default_data_dir
from afi.errors import InvalidPath
from afi.paths import normalize
from afi.provider import Caller
from afi.storage.database import is_postgres_url, open_database, store_label

from .local import open_provider
from .mount_handshake import DETACHED_ENV, MOUNTED

__all__ = [
    "DETACHED_ENV",
    "MOUNTED",
    "MountError",
    "PreparedMount",
    "change_token",
    "check_mountpoint",
    "held_folder",
    "mount_log",
    "prepare_mount",
]


def _beside_store(db: Path | str, suffix: str) -> Path:
    """Given the store, return ``<store file><suffix>`` beside a SQLite file, or, for PostgreSQL,
    ``postgres-<digest of the URL><suffix>`` in the per-user data folder (each machine has its own)."""
    if isinstance(db, str) and is_postgres_url(db):
        digest = hashlib.sha256(store_label(db).encode("utf-8")).hexdigest()[:16]
        return default_data_dir() / f"postgres-{digest}{suffix}"
    path = Path(db).expanduser()
    return path.with_name(path.name + suffix)


def mount_log(db: Path | str) -> Path:
    """Given the store, return the file a detached mount of it logs to: ``<store file>.mount.log``."""
    return _beside_store(db, ".mount.log")


def held_folder(db: Path | str) -> Path:
    """Given the store, return the folder where its mounts keep the files it refused: ``<store file>.not-stored``."""
    return _beside_store(db, ".not-stored")


def change_token(db: Path | str) -> Callable[[], Hashable]:
    """Given the store, return a function whose value changes whenever anything writes to it.

    SQLite: every write through any binding commits to the store (the WAL, or the file itself), so
    its size and modification time are a cheap way for the mount to know its cached entries are still
    good. PostgreSQL: every write verb, through any replica, adds an audit row in the same transaction,
    so the latest audit sequence number changes with every write (one index lookup); beside it the
    oldest transaction still running, since numbers are taken at insert and commits may come in another
    order: a write that took number 100 and commits after number 101 was seen moves that one instead.
    """
    if isinstance(db, str) and is_postgres_url(db):
        database = open_database(db)

        def latest_audit() -> Hashable:
            with database.read() as conn:
                row = conn.execute(
                    "SELECT (SELECT COALESCE(MAX(seq), 0) FROM audit), pg_snapshot_xmin(pg_current_snapshot())::text"
                ).fetchone()
                return int(row[0]), str(row[1])

        return latest_audit
    path = Path(db)
    files = (path, path.with_name(path.name + "-wal"))

    def token() -> Hashable:
        out = []
        for file in files:
            try:
                info = os.stat(file)
            except FileNotFoundError:
                out.append((0, 0))
                continue
            out.append((info.st_mtime_ns, info.st_size))
        return tuple(out)

    return token


@dataclass
class PreparedMount:
    """A mount whose provider and caller are ready; :meth:`run` mounts it until unmounted or signalled."""

    fs: AfiFS
    where: Path
    db: Path | str
    caller: Caller
    subtree: str
    read_only: bool

    def run(self) -> None:
        detached = config.mount_detached()
        log = mount_log(self.db)

        def announce() -> None:
            mode = ", read-only" if self.read_only else ""
            logs = f"; logs in {log}" if detached else ""
            sys.stdout.write(
                f"{MOUNTED}{self.subtree} at {self.where} as {self.caller.principal} in space {self.caller.space}"
                f"{mode} (db {store_label(self.db)}){logs}; unmount with: fusermount3 -u {self.where}\n"
            )
            sys.stdout.flush()
            if detached:
                _output_to(log)

        _log_warnings()
        serve_mount(self.fs, self.where, on_mounted=announce)


def prepare_mount(
    where: Path, db: Path | str, root: Path, secret: str | None, *, ro: bool, subtree: str, timeout: float
) -> PreparedMount:
    """Open the provider as ``secret``'s caller (the local owner without one) and build the mount's filesystem.

    The mount opens the store itself, so whoever runs it is the store's owner, whatever API keys
    exist: keys are for callers that come through a server.

    Raises an AfiError when the token is refused or ``subtree`` is not a folder.
    """
    subtree = normalize(subtree)
    info = {"mountpoint": str(where), "subtree": subtree, "read_only": ro, "pid": os.getpid()}
    provider = open_provider(db, root, manifest_extra={"x-fuse": info})
    caller = provider.authenticate(secret) if secret else LOCAL_OWNER
    if provider.stat(caller, subtree).type != "directory":
        raise InvalidPath("--subtree must name a folder", path=subtree)
    held = HeldFolder(held_folder(db), caller.space)
    fs = AfiFS(
        provider, caller, subtree=subtree, read_only=ro, timeout=timeout, change_token=change_token(db), held=held
    )
    return PreparedMount(fs, where, db, caller, subtree, ro)


def _log_warnings() -> None:
    """The mount's warnings (a write not stored, and why) go to stderr, each with its time and process."""
    logger = logging.getLogger("afi")
    if not logger.handlers:
        handler = logging.StreamHandler()  # writes to whatever sys.stderr is when it writes
        handler.setFormatter(logging.Formatter("%(asctime)s afi mount[%(process)d]: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)


def _output_to(log: Path) -> None:
    """A detached mount's parent has gone: send later output (warnings, a crash's traceback) to ``log``,
    appended, rather than into a closed pipe; nothing is read from stdin."""
    log.parent.mkdir(parents=True, exist_ok=True)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
