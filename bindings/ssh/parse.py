"""The SSH shell's own grammar: words, quotes, pipes, redirections and ``;`` (no real shell is involved).

A line is a sequence of pipelines separated by ``;``; a pipeline is commands joined by ``|``; the
last command may redirect its output with ``> FILE`` or ``>> FILE``. Quoting follows POSIX sh:
single quotes keep everything, double quotes keep everything but ``\\"`` and ``\\\\``, a backslash
outside quotes escapes the next character. A word that holds an unquoted ``*``, ``?`` or ``[`` is a
glob, expanded against the tree (not the host) by the interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from afi.errors import InvalidPath

__all__ = ["Command", "Pipeline", "Word", "parse_line"]

_OPERATORS = ("|", ";", ">>", ">", "<", "&")


@dataclass(frozen=True)
class Word:
    """One argument as typed: its text, and whether an unquoted glob character was in it."""

    text: str
    glob: bool = False


@dataclass
class Command:
    """One command of a pipeline: its words (the name first)."""

    words: list[Word] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.words[0].text if self.words else ""


@dataclass
class Pipeline:
    """Commands joined by ``|``, and where the last one's output goes (``None``: the session)."""

    commands: list[Command]
    redirect: str | None = None
    append: bool = False


def _tokens(line: str) -> list[Word | str]:
    """Given a line, return its words (``Word``) and operators (plain ``str``)."""
    out: list[Word | str] = []
    buf: list[str] = []
    started = glob = False
    i, n = 0, len(line)

    def flush() -> None:
        nonlocal started, glob
        if started:
            out.append(Word("".join(buf), glob))
        buf.clear()
        started = glob = False

    while i < n:
        ch = line[i]
        if ch in " \t\r\n":
            flush()
            i += 1
        elif ch == "#" and not started:
            break
        elif ch == "'":
            end = line.find("'", i + 1)
            if end < 0:
                raise InvalidPath("unterminated single quote in the command line")
            buf.append(line[i + 1 : end])
            started, i = True, end + 1
        elif ch == '"':
            i += 1
            while True:
                if i >= n:
                    raise InvalidPath("unterminated double quote in the command line")
                ch = line[i]
                if ch == '"':
                    break
                if ch == "\\" and i + 1 < n and line[i + 1] in '"\\$`':
                    i += 1
                    ch = line[i]
                buf.append(ch)
                i += 1
            started, i = True, i + 1
        elif ch == "\\":
            if i + 1 < n:
                buf.append(line[i + 1])
            started, i = True, i + 2
        elif any(line.startswith(op, i) for op in _OPERATORS):
            flush()
            op = next(op for op in _OPERATORS if line.startswith(op, i))
            out.append(op)
            i += len(op)
        else:
            if ch in "*?[":
                glob = True
            buf.append(ch)
            started, i = True, i + 1
    flush()
    return out


def parse_line(line: str) -> list[Pipeline]:
    """Given a command line, return its pipelines in order.

    Raises:
        InvalidPath: unbalanced quotes, an empty command around ``|``, a redirection without a
            file, or an operator this shell does not offer (``<``, ``&``).
    """
    pipelines: list[Pipeline] = []
    current = Pipeline(commands=[Command()])
    tokens = _tokens(line)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if isinstance(token, Word):
            if current.redirect is not None:
                raise InvalidPath("nothing may follow the redirection's file name")
            current.commands[-1].words.append(token)
        elif token == "|":
            if not current.commands[-1].words or current.redirect is not None:
                raise InvalidPath("a '|' needs a command on both sides")
            current.commands.append(Command())
        elif token in (">", ">>"):
            target = tokens[i + 1] if i + 1 < len(tokens) else None
            if not isinstance(target, Word) or not current.commands[-1].words:
                raise InvalidPath(f"'{token}' needs a command before it and a file name after it")
            current.redirect, current.append = target.text, token == ">>"
            i += 1
        elif token == ";":
            _close(current, pipelines)
            current = Pipeline(commands=[Command()])
        else:
            raise InvalidPath(f"'{token}' is not offered by this shell: use pipes '|', '>' and '>>'")
        i += 1
    _close(current, pipelines)
    return pipelines


def _close(current: Pipeline, pipelines: list[Pipeline]) -> None:
    if current.commands[-1].words:
        pipelines.append(current)
    elif len(current.commands) > 1:
        raise InvalidPath("a '|' needs a command on both sides")
