from __future__ import annotations

import os
from pathlib import Path

import pytest

from afi.providers.memory import FileJail, MemoryValidationError


@pytest.fixture
def jail(tmp_path: Path) -> FileJail:
    return FileJail(tmp_path / "root")


def test_resolves_inside(jail: FileJail) -> None:
    assert jail.resolve("a/b.txt") == jail.root / "a" / "b.txt"
    assert jail.resolve("") == jail.root
    assert jail.resolve("./a") == jail.root / "a"


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("../x", id="dotdot"),
        pytest.param("a/../../x", id="dotdot-deep"),
        pytest.param("/etc/passwd", id="absolute"),
        pytest.param("a\x00b", id="nul"),
    ],
)
def test_refuses_escapes(jail: FileJail, bad: str) -> None:
    with pytest.raises(MemoryValidationError):
        jail.resolve(bad)


def test_refuses_symlinks_inside_and_out(jail: FileJail, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    os.symlink(outside, jail.root / "link")
    with pytest.raises(MemoryValidationError, match="symlink"):
        jail.resolve("link/secret")
    (jail.root / "real.txt").write_text("r")
    os.symlink(jail.root / "real.txt", jail.root / "inner")
    with pytest.raises(MemoryValidationError, match="symlink"):
        jail.resolve("inner")


def test_root_behind_a_symlink_is_its_real_path(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "alias")
    jail = FileJail(tmp_path / "alias")
    assert jail.root == real.resolve()
    assert jail.resolve("x") == real.resolve() / "x"


@pytest.fixture(params=["openat2", "check-then-open"])
def opener(request: pytest.FixtureRequest, jail: FileJail, monkeypatch: pytest.MonkeyPatch) -> FileJail:
    """The same jail, opening through the kernel's openat2 or through the portable fallback."""
    from afi.providers.memory.workspace import jail as jail_module

    if request.param == "check-then-open":
        monkeypatch.setattr(jail_module._openat2, "_syscall", None)
    elif not _kernel_jail(jail):
        pytest.skip("this kernel or platform has no openat2")
    return jail


def test_open_reads_a_file_inside(opener: FileJail) -> None:
    (opener.root / "a").mkdir()
    (opener.root / "a" / "b.txt").write_text("hello")
    fd = opener.open("a/b.txt", os.O_RDONLY)
    try:
        assert os.read(fd, 10) == b"hello"
    finally:
        os.close(fd)


def test_open_missing_and_folder_raise_as_os_open(opener: FileJail) -> None:
    (opener.root / "dir").mkdir()
    with pytest.raises(FileNotFoundError):
        opener.open("nope.txt", os.O_RDONLY)
    with pytest.raises(IsADirectoryError):
        opener.open("dir", os.O_WRONLY)


@pytest.mark.parametrize("where", ["leaf", "parent"])
def test_open_refuses_symlinks(opener: FileJail, tmp_path: Path, where: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    if where == "leaf":
        os.symlink(outside / "secret", opener.root / "link")
        relative = "link"
    else:
        os.symlink(outside, opener.root / "link")
        relative = "link/secret"
    with pytest.raises(MemoryValidationError, match="outside the workspace root"):
        opener.open(relative, os.O_RDONLY)


def test_open_refuses_escapes(opener: FileJail) -> None:
    for bad in ("../x", "/etc/passwd", "a\x00b"):
        with pytest.raises(MemoryValidationError):
            opener.open(bad, os.O_RDONLY)


def test_open_refuses_text_that_is_not_a_path(opener: FileJail) -> None:
    with pytest.raises(MemoryValidationError, match="not valid text"):
        opener.open("bad\ud800", os.O_RDONLY)
    with pytest.raises(ValueError, match="O_PATH"):
        opener.open("x", os.O_PATH)


def test_a_refused_open_does_not_turn_the_kernel_check_off(jail: FileJail, monkeypatch: pytest.MonkeyPatch) -> None:
    """EPERM for one file (an immutable file, say) is that file's answer, not a sign openat2 is filtered."""
    import ctypes
    import errno

    from afi.providers.memory.workspace import jail as jail_module

    if not _kernel_jail(jail):
        pytest.skip("this kernel or platform has no openat2")
    real = jail_module._openat2._syscall
    assert real is not None

    def refusing(number: object, dir_fd: object, path: ctypes.c_char_p, *rest: object) -> int:
        if path.value == b"frozen.txt":
            ctypes.set_errno(errno.EPERM)
            return -1
        return real(number, dir_fd, path, *rest)

    monkeypatch.setattr(jail_module._openat2, "_syscall", refusing)
    (jail.root / "frozen.txt").write_text("f")
    (jail.root / "other.txt").write_text("o")
    with pytest.raises(PermissionError):
        jail.open("frozen.txt", os.O_RDONLY)
    assert jail_module._openat2._syscall is refusing
    os.close(jail.open("other.txt", os.O_RDONLY))


def _kernel_jail(jail: FileJail) -> bool:
    from afi.providers.memory.workspace import jail as jail_module

    root_fd = os.open(jail.root, os.O_PATH | os.O_DIRECTORY)
    try:
        return jail_module._openat2.usable(root_fd)
    finally:
        os.close(root_fd)
