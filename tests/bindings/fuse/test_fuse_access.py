"""Mount options: --ro, --token (principal, space, scopes) and --subtree."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import warm
from tests.support.fuse import AFI, afi_mount, needs_fuse

pytestmark = needs_fuse


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, dict[str, Path]]]:
    """A store with keys: writer and reader in space default, other in space other; and some data."""
    from afi.auth.keys import KeyStore
    from afi.providers.memory.provider import MemoryProvider

    base = tmp_path_factory.mktemp("fuse-access")
    db, root = base / "afi.db", base / "files"
    keys = KeyStore(db)
    files: dict[str, Path] = {}
    for name, space, scope in (
        ("writer", "default", "afi:write"),
        ("reader", "default", "afi:read"),
        ("other", "other", "afi:write"),
    ):
        files[name] = base / f"{name}.key"
        files[name].write_text(keys.create(space=space, scopes=(scope,), name=name)[1])
    keys.close()
    provider = MemoryProvider(db, root)
    owner = provider.authenticate(files["writer"].read_text())
    provider.write(owner, "/facts/secret.md", b"The vault code is orange-7.\n")
    provider.write(owner, "/files/plan.txt", b"ship it\n")
    yield db, root, files


def test_ro_refuses_every_change_with_erofs_and_still_searches(
    store: tuple[Path, Path, dict[str, Path]], tmp_path: Path
) -> None:
    db, root, keys = store
    with afi_mount(tmp_path / "m", db, root, "--ro", "--token", str(keys["writer"])) as mount:
        facts = mount.path / "facts"
        for change in (
            lambda: (facts / "new.md").write_text("x\n"),
            lambda: (facts / "secret.md").write_text("x\n"),
            lambda: os.unlink(facts / "secret.md"),
            lambda: os.mkdir(mount.path / "files" / "d"),
            lambda: os.rename(mount.path / "files" / "plan.txt", mount.path / "files" / "p.txt"),
            lambda: os.truncate(mount.path / "files" / "plan.txt", 0),
        ):
            with pytest.raises(OSError) as caught:
                change()
            assert caught.value.errno == errno.EROFS
        assert (mount.path / "files" / "plan.txt").read_text() == "ship it\n"
        assert "orange-7" in (facts / "secret.md").read_text()
        fd = os.open(mount.path / ".afi" / "search", os.O_RDWR)
        try:
            os.write(fd, b'{"query": "orange-7", "path": "/facts"}')
            assert json.loads(os.pread(fd, 65536, 0).split(b"\n")[0])["path"] == "/facts/secret.md"
        finally:
            os.close(fd)


def test_a_read_scope_token_mounts_read_and_refuses_writes_with_eacces(
    store: tuple[Path, Path, dict[str, Path]], tmp_path: Path
) -> None:
    db, root, keys = store
    with afi_mount(tmp_path / "m", db, root, "--token", str(keys["reader"])) as mount:
        assert "as " in mount.announced and "in space default" in mount.announced
        assert "orange-7" in (mount.path / "facts" / "secret.md").read_text()
        with pytest.raises(PermissionError):
            (mount.path / "facts" / "new.md").write_text("x\n")
        with pytest.raises(PermissionError):
            os.unlink(mount.path / "files" / "plan.txt")
        assert (mount.path / "files" / "plan.txt").exists()


def test_a_token_of_another_space_sees_none_of_this_one(
    store: tuple[Path, Path, dict[str, Path]], tmp_path: Path
) -> None:
    db, root, keys = store
    with afi_mount(tmp_path / "m", db, root, "--token", str(keys["other"])) as mount:
        assert "in space other" in mount.announced
        assert "secret.md" not in os.listdir(mount.path / "facts")
        with pytest.raises(FileNotFoundError):
            (mount.path / "facts" / "secret.md").read_text()
        with pytest.raises(FileNotFoundError):
            (mount.path / "files" / "plan.txt").stat()
        done = subprocess.run(["grep", "-r", "orange-7", str(mount.path / "facts")], capture_output=True)
        assert done.returncode == 1


def test_a_store_with_keys_mounts_as_its_owner_without_a_token(
    store: tuple[Path, Path, dict[str, Path]], tmp_path: Path
) -> None:
    """The mount opens the store itself: whoever runs it owns the store, whatever API keys exist."""
    db, root, _ = store
    with afi_mount(tmp_path / "m", db, root) as mount:
        assert "as local in space default" in mount.announced
        assert (mount.path / "facts" / "secret.md").read_text().endswith("orange-7.\n")
        (mount.path / "files" / "owned.txt").write_text("The owner may write.\n")
        (mount.path / "files" / "owned.txt").unlink()
    bad = tmp_path / "bad.key"
    bad.write_text("afi_not-a-real-key")
    (tmp_path / "n").mkdir()
    done = warm.run(
        [*AFI, "mount", str(tmp_path / "n"), "--db", str(db), "--root", str(root), "-f", "--token", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "unauthorized" in done.stderr
    assert not os.path.ismount(tmp_path / "n")


def test_subtree_mounts_one_folder(store: tuple[Path, Path, dict[str, Path]], tmp_path: Path) -> None:
    db, root, keys = store
    with afi_mount(tmp_path / "m", db, root, "--subtree", "/facts", "--token", str(keys["writer"])) as mount:
        assert "secret.md" in os.listdir(mount.path)
        assert "orange-7" in (mount.path / "secret.md").read_text()
        (mount.path / "added.md").write_text("Added through a subtree mount.\n")
        assert "added.md" in os.listdir(mount.path)
    (tmp_path / "m2").mkdir()
    done = warm.run(
        [
            *AFI,
            "mount",
            str(tmp_path / "m2"),
            "--db",
            str(db),
            "--root",
            str(root),
            "-f",
            "--subtree",
            "/facts/secret.md",
            "--token",
            str(keys["writer"]),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--subtree must name a folder" in done.stderr
