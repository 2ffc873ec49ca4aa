"""The SSH shell's interpreter: run a parsed line over the AFI verbs of one caller, never a real shell.

A command is a generator (:mod:`.base`; the table of them is :mod:`.commands`): given the shell,
its arguments and its input (chunks of bytes), it yields its output and reports per-operand errors
through :class:`~.base.Io`, as the GNU tools do (keep going, exit non-zero). Pipelines chain those
generators lazily, so ``grep -r x / | head -n 3`` stops the search once three lines are out.
Everything runs synchronously, in one worker thread per line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from afi.errors import SSH_EXIT, AfiError, Internal, InvalidPath, TooLarge, Unsupported
from afi.glob import Glob
from afi.model import Entry
from afi.paths import join, normalize

from .base import CommandSpec, Io, error_line
from .commands import COMMANDS
from .parse import Pipeline, Word, parse_line
from .verbs import Verbs

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_OUTPUT_CAP", "LineResult", "Shell"]

DEFAULT_OUTPUT_CAP = 4 * 1024 * 1024
DEFAULT_WRITE_CAP = 64 * 1024 * 1024


@dataclass
class LineResult:
    """The outcome of one command line: what it printed, its errors, its exit status."""

    stdout: bytes
    stderr: str
    status: int


class Shell:
    """One session's shell: the client it speaks through, who it is, and where it stands.

    Args:
        client: the AFI verbs, already bound to the caller (:class:`~.verbs.CallerVerbs`).
        user, group: shown as owner and group in ``ls -l`` (the principal and its space).
        output_cap: the most bytes one command line may print; past it the line fails with too_large.
        write_cap: the most bytes one ``> FILE`` redirection may write.
        agents_text: what ``agents`` prints (where this server is, how to use it).
        commands: the commands by name (:data:`.commands.COMMANDS` unless given).
    """

    def __init__(
        self,
        client: Verbs,
        *,
        user: str = "afi",
        group: str = "afi",
        output_cap: int = DEFAULT_OUTPUT_CAP,
        write_cap: int = DEFAULT_WRITE_CAP,
        agents_text: str = "",
        commands: Mapping[str, CommandSpec] = COMMANDS,
    ) -> None:
        self.client = client
        self.user = user
        self.group = group
        self.cwd = "/"
        self.output_cap = output_cap
        self.write_cap = write_cap
        self.agents_text = agents_text
        self.commands = commands

    # -- paths ---------------------------------------------------------------------------------

    def path(self, arg: str) -> str:
        """Given an argument, return the absolute normalised AFI path it names (relative to the cwd)."""
        return normalize(arg if arg.startswith("/") else join(self.cwd, arg))

    def expand(self, word: Word) -> list[str]:
        """Given a word, return it, or the tree paths its glob matches (sorted; as typed when none)."""
        if not word.glob:
            return [word.text]
        absolute = word.text.startswith("/")
        try:
            pattern = self.path(word.text)
        except InvalidPath:
            return [word.text]
        found = ["/"]
        parts = [p for p in pattern.split("/") if p]
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            if not any(c in part for c in "*?["):
                found = [join(base, part) for base in found]
                continue
            nxt: list[str] = []
            for base in found:
                nxt.extend(self._glob_children(base, part, dirs_only=not last))
            found = nxt
        if not found:
            return [word.text]
        if absolute:
            return sorted(found)
        prefix = "" if self.cwd == "/" else self.cwd
        return sorted(p[len(prefix) + 1 :] if p.startswith(prefix + "/") else p for p in found)

    def _glob_children(self, base: str, part: str, *, dirs_only: bool) -> list[str]:
        try:
            entries = self.list_all(base)
        except AfiError:
            return []
        out = []
        matches = Glob(part).matches
        for entry in entries:
            name = entry.path.rsplit("/", 1)[-1]
            if name.startswith(".") and not part.startswith("."):
                continue
            if matches(name) and (not dirs_only or entry.type == "directory"):
                out.append(entry.path)
        return out

    def list_all(self, path: str) -> list[Entry]:
        """Given a folder, return every child entry, following the cursor through all pages."""
        entries: list[Entry] = []
        cursor: str | None = None
        while True:
            page = self.client.list(path, cursor=cursor)
            entries.extend(page.entries)
            if not page.next_cursor:
                return entries
            cursor = page.next_cursor

    # -- running -------------------------------------------------------------------------------

    def run_line(self, line: str, stdin: Iterable[bytes] = ()) -> LineResult:
        """Given a command line and the session's input, run it; return what it printed and its status."""
        try:
            pipelines = parse_line(line)
        except AfiError as err:
            return LineResult(b"", error_line(err), SSH_EXIT.get(err.code, 2))
        out = bytearray()
        errors: list[str] = []
        status = 0
        for index, pipeline in enumerate(pipelines):
            status = self._run_pipeline(pipeline, stdin if index == 0 else (), out, errors)
        return LineResult(bytes(out), "".join(errors), status)

    def _run_pipeline(self, pipeline: Pipeline, stdin: Iterable[bytes], out: bytearray, errors: list[str]) -> int:
        ios: list[Io] = []
        stream: Iterable[bytes] = stdin
        produced = bytearray()
        sink = produced if pipeline.redirect is not None else out
        try:
            for cmd in pipeline.commands:
                spec = self.commands.get(cmd.name)
                if spec is None:
                    raise Unsupported(f"no such command {cmd.name!r} here; type 'help' for the commands")
                args = [text for word in cmd.words[1:] for text in self.expand(word)]
                io = Io(stdin=stream)
                ios.append(io)
                stream = spec.fn(self, args, io)
            self._drain(stream, sink, self.output_cap if pipeline.redirect is None else self.write_cap)
            if pipeline.redirect is not None:
                target = self.path(pipeline.redirect)
                self.client.write(target, bytes(produced), append=pipeline.append)
        except AfiError as err:
            errors.extend(line for io in ios for line in io.errors)
            errors.append(error_line(err))
            return SSH_EXIT.get(err.code, 2)
        except Exception as err:  # a bug must end this line with an error, not the session
            # The type only: an OSError's text can name host paths the client must not learn.
            log.exception("an ssh command failed")
            errors.append(error_line(Internal(f"the command failed ({type(err).__name__})")))
            return SSH_EXIT["internal"]
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        errors.extend(line for io in ios for line in io.errors)
        failed = [io.status for io in ios[:-1] if io.status >= 2]
        return failed[0] if failed and ios[-1].status == 0 else ios[-1].status

    @staticmethod
    def _drain(stream: Iterable[bytes], sink: bytearray, cap: int) -> None:
        for chunk in stream:
            room = cap - len(sink)
            if len(chunk) > room:
                sink.extend(chunk[: max(room, 0)])
                raise TooLarge(
                    f"the output is over the {cap}-byte cap per command and was cut; "
                    "narrow it (a smaller path, grep -l, head -n N)"
                )
            sink.extend(chunk)
