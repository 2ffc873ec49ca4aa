"""The SSH shell's level-3 commands: ``mkdir rm rmdir mv cp touch tee`` (``> FILE`` lives in the interpreter).

Each operand is one provider verb, so a refused operand (a read-only key, a read-only area) leaves
the tree as it was and prints ``afi: <path>: <code>: <message>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from afi.errors import AfiError, InvalidPath, NotFound
from afi.paths import basename, join

from .base import Io, read_operand
from .cmds import known_flags, split_flags

if TYPE_CHECKING:
    from .shell import Shell

__all__: list[str] = []


def mkdir(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    flags, operands = split_flags(args)
    known_flags(flags, "p", "mkdir")
    if not operands:
        raise InvalidPath("mkdir: give a folder to make")
    for operand in operands:
        try:
            shell.client.mkdir(shell.path(operand), parents="p" in flags)
        except AfiError as err:
            io.fail(err)
    yield b""


def rm(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    flags, operands = split_flags(args)
    known_flags(flags, "rRf", "rm")
    if not operands and "f" not in flags:
        raise InvalidPath("rm: give a path to delete")
    recursive = "r" in flags or "R" in flags
    for operand in operands:
        path = shell.path(operand)
        try:
            if not recursive and shell.client.stat(path).type == "directory":
                raise InvalidPath("is a folder (use rm -r)", path=path)
            shell.client.delete(path, recursive=recursive)
        except NotFound as err:
            if "f" not in flags:
                io.fail(err)
        except AfiError as err:
            io.fail(err)
    yield b""


def rmdir(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    for operand in args:
        try:
            path = shell.path(operand)
            if shell.client.stat(path).type != "directory":
                raise InvalidPath("not a folder", path=path)
            shell.client.delete(path)
        except AfiError as err:
            io.fail(err)
    yield b""


def _into(shell: Shell, sources: list[str], target: str) -> list[tuple[str, str]]:
    """Pair each source with its destination (inside ``target`` when it is a folder or there are several)."""
    dest = shell.path(target)
    try:
        is_dir = shell.client.stat(dest).type == "directory"
    except NotFound:
        is_dir = False
    if len(sources) > 1 and not is_dir:
        raise InvalidPath("with several sources the target must be a folder", path=dest)
    pairs = []
    for source in sources:
        src = shell.path(source)
        pairs.append((src, join(dest, basename(src)) if is_dir else dest))
    return pairs


def mv(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    flags, operands = split_flags(args)
    known_flags(flags, "fn", "mv")
    if len(operands) < 2:
        raise InvalidPath("mv: give a source and a target")
    for src, dst in _into(shell, operands[:-1], operands[-1]):
        try:
            shell.client.move(src, dst, overwrite="n" not in flags)
        except AfiError as err:
            io.fail(err)
    yield b""


def cp(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    flags, operands = split_flags(args)
    known_flags(flags, "f", "cp")
    if len(operands) < 2:
        raise InvalidPath("cp: give a source and a target")
    for src, dst in _into(shell, operands[:-1], operands[-1]):
        try:
            if shell.client.stat(src).type == "directory":
                raise InvalidPath("is a folder; this cp copies files", path=src)
            shell.client.write(dst, b"".join(read_operand(shell, src)))
        except AfiError as err:
            io.fail(err)
    yield b""


def touch(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    for operand in args:
        path = shell.path(operand)
        try:
            shell.client.stat(path)
        except NotFound:
            try:
                shell.client.write(path, b"", create_only=True)
            except AfiError as err:
                io.fail(err)
        except AfiError as err:
            io.fail(err)
    yield b""


def tee(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    flags, operands = split_flags(args)
    known_flags(flags, "a", "tee")
    if len(operands) != 1:
        raise InvalidPath("tee: give one file")
    data = b"".join(io.stdin)
    shell.client.write(shell.path(operands[0]), data, append="a" in flags)
    yield data
