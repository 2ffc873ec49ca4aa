"""One store served through every door at once, for suites that read the same data through each:
``afi serve`` (HTTP and MCP) and ``afi ssh`` over one SQLite store, a writer API key, and an SSH key
attached to it. Also :func:`instant`, a moment between two writes (versions are stamped to the ms)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from tests.support.ssh import add_key, keygen, start_afi


@dataclass(frozen=True)
class Doors:
    """Where the store is served, and the writer's credentials."""

    http: str
    ssh_port: int
    token: str
    ssh_key: Path
    db: Path
    root: Path
    base: Path

    def put(self, path: str, body: bytes) -> None:
        """Write ``body`` at ``path`` over HTTP as the writer."""
        httpx.put(f"{self.http}/afi/write", params={"path": path}, headers=self.auth, content=body).raise_for_status()

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def instant() -> str:
    """Now, canonical, with a pause either side so no version shares its millisecond."""
    time.sleep(0.02)
    moment = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    time.sleep(0.02)
    return moment


@contextlib.contextmanager
def served_doors(base: Path) -> Iterator[Doors]:
    """Serve a new store in ``base`` over HTTP (with MCP) and SSH until the block ends."""
    from afi.auth.keys import KeyStore

    db, root = base / "afi.db", base / "files"
    token = KeyStore(db).create(space="default", scopes=("afi:write",), name="writer")[1]
    writer = next(k.id for k in KeyStore(db).list() if k.name == "writer")
    ssh_key = keygen(base, "writer")
    add_key(db, ssh_key.with_suffix(".pub"), api_key=writer)
    store = ["--db", str(db), "--root", str(root)]
    with (
        start_afi(["serve", "--host", "127.0.0.1", "--port", "0", *store], base / "xdg") as http,
        start_afi(["ssh", "--port", "0", "--conn-rate", "0", "--cmd-rate", "0", *store], base / "xdg") as ssh,
    ):
        yield Doors(f"http://127.0.0.1:{http['http']}", ssh["ssh"], token, ssh_key, db, root, base)
