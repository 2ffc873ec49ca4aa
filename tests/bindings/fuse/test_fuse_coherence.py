"""Coherence between the mount and the HTTP binding over one store."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from afi.clients import HttpClient
from tests.support.fuse import Mount, afi_mount, needs_fuse
from tests.support.servers import AfiServer, start_afi_serve

pytestmark = needs_fuse


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AfiServer, Mount]]:
    base = tmp_path_factory.mktemp("fuse-coherence")
    db, root = base / "afi.db", base / "files"
    with start_afi_serve(db, root) as server, afi_mount(base / "m", db, root) as mount:
        yield server, mount


def _until(check: object, seconds: float) -> float:
    """Poll ``check()`` until it holds; return how long it took (fail after ``seconds``)."""
    start = time.monotonic()
    while not check():  # type: ignore[operator]
        assert time.monotonic() - start < seconds, "the change never showed"
        time.sleep(0.02)
    return time.monotonic() - start


def test_an_http_write_shows_through_the_mount(both: tuple[AfiServer, Mount]) -> None:
    server, mount = both
    path = mount.path / "files" / "shared.txt"
    with HttpClient(server.url) as http:
        http.write("/files/shared.txt", b"v1\n")
        assert path.read_bytes() == b"v1\n"  # now in the kernel's caches and the mount's
        http.write("/files/shared.txt", b"v2\n")  # same size: only a real invalidation shows it
        _until(lambda: path.read_bytes() == b"v2\n", 3.0)
        http.write("/facts/told.md", b"Told over HTTP.\n")
        _until(lambda: (mount.path / "facts" / "told.md").exists(), 3.0)
        http.delete("/files/shared.txt")
        _until(lambda: not path.exists(), 3.0)


def test_a_mount_write_is_visible_over_http_at_once(both: tuple[AfiServer, Mount]) -> None:
    server, mount = both
    with HttpClient(server.url) as http:
        (mount.path / "files" / "from-mount.txt").write_bytes(b"written in the mount\n")
        assert http.read("/files/from-mount.txt").data == b"written in the mount\n"
        (mount.path / "facts" / "from-mount.md").write_text("A fact from the mount.\n")
        assert "A fact from the mount." in http.read("/facts/from-mount.md").data.decode()
        (mount.path / "facts" / "from-mount.md").unlink()
        assert all(e.path != "/facts/from-mount.md" for e in http.list("/facts").entries)
