"""What a command of the SSH shell sees and uses: its :class:`Io`, its entry in the table, and helpers.

A command is a generator: given the shell, its arguments and its :class:`Io`, it yields its output
and reports per-operand errors through ``io.fail``. :mod:`.commands` lists them by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from afi.errors import SSH_EXIT, AfiError, InvalidPath

if TYPE_CHECKING:
    from .shell import Shell

__all__ = ["CommandFn", "CommandSpec", "Io", "error_line", "iter_lines", "no_input", "read_operand"]

CommandFn = Callable[["Shell", list[str], "Io"], Iterator[bytes]]


@dataclass(frozen=True)
class CommandSpec:
    """One shell command: the generator that runs it, and how ``help`` shows it."""

    fn: CommandFn
    usage: str
    summary: str
    writes: bool = False


def error_line(err: AfiError) -> str:
    """Given an AfiError, return the one stderr line every SSH error is: ``afi: <path>: <code>: <message>``."""
    where = f"{err.path}: " if err.path else ""
    return f"afi: {where}{err.code}: {err.message}\n"


@dataclass
class Io:
    """What one command sees: its input, and where its errors and exit status go."""

    stdin: Iterable[bytes]
    errors: list[str] = field(default_factory=list)
    status: int = 0

    def fail(self, err: AfiError) -> None:
        """Record an error for one operand and keep going (the command ends non-zero)."""
        self.errors.append(error_line(err))
        self.status = SSH_EXIT.get(err.code, 2)


def iter_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Given chunks of bytes, yield lines, each with its ``\\n`` (the last one may lack it)."""
    rest = b""
    for chunk in chunks:
        rest += chunk
        while True:
            cut = rest.find(b"\n")
            if cut < 0:
                break
            yield rest[: cut + 1]
            rest = rest[cut + 1 :]
    if rest:
        yield rest


def no_input() -> Iterator[bytes]:
    """The input of a command typed at the interactive prompt: there is none to read."""
    raise InvalidPath(
        "the interactive shell has no input stream here: use 'echo TEXT > FILE', or 'ssh host cat > FILE'"
    )
    yield b""  # pragma: no cover - makes this a generator


def read_operand(shell: Shell, path: str, *, chunk: int = 1 << 20) -> Iterator[bytes]:
    """Given a file path, yield its bytes in chunks (a folder is invalid_path, as reading one is)."""
    offset = 0
    while True:
        result = shell.client.read(path, offset=offset, length=chunk)
        if result.data:
            yield result.data
        offset += len(result.data)
        if result.eof or not result.data:
            return
