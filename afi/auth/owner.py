"""The owner's credential: a bearer token kept in a file beside the store, readable by its owner only.

Whoever runs the CLI on this machine and can read the store's folder owns the store already (they
can open the SQLite file). Once API keys exist, a server asks every caller for a token; this one
lets the owner keep using it, e.g. ``curl -H "Authorization: Bearer $(afi auth token)" …``. It is
never stored in the database, so it is not an API key: it is not counted as one, and creating it
never turns keyless loopback mode off.

Where it lives: beside a SQLite store, as ``<store file>.owner-token``; for a PostgreSQL store, in the
per-user data folder, named after the URL (without its password), so each machine has its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from ..config import default_data_dir
from ..errors import Forbidden
from ..storage.database import is_postgres_url, store_label

__all__ = ["OWNER_PREFIX", "OwnerCredential", "OwnerFile", "ensure_owner_token", "owner_token_path"]

OWNER_PREFIX = "afi_owner_"


def owner_token_path(db: Path | str) -> Path:
    """Given the store (``--db``), return where its owner token lives on this machine."""
    if is_postgres_url(db):
        digest = hashlib.sha256(store_label(db).encode("utf-8")).hexdigest()[:16]
        return default_data_dir() / f"postgres-{digest}.owner-token"
    path = Path(db).expanduser()
    return path.with_name(path.name + ".owner-token")


@dataclass(frozen=True)
class OwnerFile:
    """What is known of an owner-token file: its path, and its token when it is present and private."""

    path: Path
    token: str | None
    problem: str | None = None  # why the file is not used, when it exists but is not

    @classmethod
    def read(cls, path: Path) -> OwnerFile:
        """Given the file's path, read it; a file others may read or write is not used."""
        try:
            info = path.stat()
            text = path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return cls(path, None)
        except OSError as err:
            return cls(path, None, f"cannot read it: {err.strerror or err}")
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            return cls(path, None, f"others may read or change it (mode {info.st_mode & 0o777:o}): chmod 600 {path}")
        if not text.startswith(OWNER_PREFIX):
            return cls(path, None, f"it does not hold an owner token ({OWNER_PREFIX}…)")
        return cls(path, text)


def ensure_owner_token(db: Path | str) -> str:
    """Given the store, return its owner token, creating the file (mode 0600) the first time.

    Raises:
        Forbidden: the file exists but is not private, or holds no owner token (it is left alone).
    """
    path = owner_token_path(db)
    path.parent.mkdir(parents=True, exist_ok=True)
    token = OWNER_PREFIX + secrets.token_urlsafe(32)
    with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(token + "\n")
    found = OwnerFile.read(path)
    if found.token is None:
        raise Forbidden(f"the owner token file {path} is not used: {found.problem or 'it is empty'}")
    return found.token


class OwnerCredential:
    """The owner token a server accepts: the file's, read again whenever it changes on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._token: str | None = None

    def matches(self, token: str) -> bool:
        """Given a presented bearer token, True when it is the owner's (compared in constant time)."""
        if not token.startswith(OWNER_PREFIX):
            return False
        try:
            info = self.path.stat()
        except OSError:
            return False
        stamp = (info.st_mtime_ns, info.st_ino)
        if stamp != self._stamp:
            self._token, self._stamp = OwnerFile.read(self.path).token, stamp
        return self._token is not None and hmac.compare_digest(self._token.encode(), token.encode())
