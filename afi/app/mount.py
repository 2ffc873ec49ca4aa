"""``afi mount``: the memory provider shown as a directory through the FUSE binding.

Without ``--foreground`` the command checks the folder, then forks: the child, in a session of its
own, opens the store and mounts; the parent returns once the child says it is mounted. So the parent
loads nothing heavy, and the child does not start a second interpreter: the store, the provider,
pyfuse3 and trio are imported once, where they are used (:func:`prepare_mount`, :meth:`PreparedMount.run`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from afi import config
from afi.bindings.fuse.mountpoint import MountError, check_mountpoint
from afi.config import default_data_dir

from .mount_handshake import DETACHED_ENV, MOUNTED

if TYPE_CHECKING:
    from afi.bindings.fuse import AfiFS
    from afi.provider import Caller

__all__ = [
    "DETACHED_ENV",
    "MOUNTED",
    "MountError",
    "PreparedMount",
    "change_token",
    "check_mountpoint",
    "detach",
    "held_folder",
    "mount_log",
    "prepare_mount",
]


def _beside_store(db: Path | str, suffix: str) -> Path:
    """Given the store, return ``<store file><suffix>`` beside a SQLite file, or, for PostgreSQL,
    ``postgres-<digest of the URL><suffix>`` in the per-user data folder (each machine has its own)."""
    from afi.storage.database import is_postgres_url, store_label

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
    from afi.storage.database import is_postgres_url, open_database

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
        from afi.bindings.fuse import serve_mount
        from afi.storage.database import store_label

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


def detach() -> int | None:
    """Carry this mount on in a forked child, the leader of a new session, whose output comes here.

    In the child, return ``None``: it goes on to mount, and says :data:`MOUNTED` once it is up. Here,
    wait for that line: echo it and return 0; or, when the child ends first, echo what it said on
    stderr and return its exit code (2 when it was signalled).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    out_read, out_write = os.pipe()
    # stderr goes to an unnamed file, not a pipe: however much the child says before it is up
    # (warnings, a traceback), it never waits for this process to read it
    with tempfile.TemporaryFile() as said:
        pid = os.fork()
        if pid == 0:
            os.setsid()
            os.dup2(out_write, 1)
            os.dup2(said.fileno(), 2)
            os.close(out_read)
            os.close(out_write)
            os.environ[DETACHED_ENV] = "1"
            return None
        os.close(out_write)
        with os.fdopen(out_read, encoding="utf-8", errors="replace") as out:
            for line in out:
                if line.startswith(MOUNTED):
                    sys.stdout.write(line)
                    sys.stdout.flush()
                    return 0
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        said.seek(0)
        sys.stderr.write(said.read().decode("utf-8", "replace"))
        sys.stderr.flush()
    return code if code > 0 else 2


def prepare_mount(
    where: Path, db: Path | str, root: Path, secret: str | None, *, ro: bool, subtree: str, timeout: float
) -> PreparedMount:
    """Open the provider as ``secret``'s caller (the local owner without one) and build the mount's filesystem.

    The mount opens the store itself, so whoever runs it is the store's owner, whatever API keys
    exist: keys are for callers that come through a server.

    Raises an AfiError when the token is refused or ``subtree`` is not a folder.
    """
    from afi.auth.keys import LOCAL_OWNER
    from afi.bindings.fuse import AfiFS, HeldFolder
    from afi.errors import InvalidPath
    from afi.paths import normalize

    from .local import open_provider

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
