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
