"""``afi``: one CLI for every door. Each command opens the store, calls one thing, renders it.

Command modules live in :mod:`afi.commands`; each exposes ``register(app)``. A command turns an
:class:`~afi.errors.AfiError` into ``afi: <path>: <code>: <message>`` on stderr and exit code 2.

``afi`` answers at once: a command's module is imported, and its command built, when that command is
used (:data:`COMMANDS` says which module holds which), so ``afi --version`` builds none and ``afi ls``
builds two; ``afi -h`` builds them all to list them. A command module imports typer and the standard
library, and what its command needs (the provider, a server, rich) inside the command's function
(tests/cli/test_cli_imports.py keeps it so).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from typing import Annotated, Any

import typer
import typer.main
from typer._completion_classes import completion_init
from typer.core import TyperGroup

from . import __version__

__all__ = ["COMMANDS", "app", "main"]

# Every command, in the order ``afi -h`` lists them, and the module of afi.commands that registers it.
COMMANDS: dict[str, str] = {
    "remember": "memory",
    "recall": "memory",
    "forget": "memory",
    "serve": "serve",
    "conformance": "conformance",
    "mount": "mount",
    "mcp": "mcp",
    "ssh": "ssh",
    "search": "search",
    "ls": "files",
    "cat": "files",
    "diff": "diff",
    "export": "bundle",
    "import": "bundle",
    "gc": "gc",
    "token": "token",
    "auth": "auth",
    "audit": "audit",
    "db": "db",
    "doctor": "doctor",
    "session": "session",
    "snapshot": "snapshot",
    "space": "space",
    "sync": "sync",
}
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(f"afi.commands.{module}" for module in COMMANDS.values()))


def _build(module: str) -> MutableMapping[str, Any]:
    """Given a module of afi.commands, return the click commands it registers, by name."""
    commands = typer.Typer(rich_markup_mode=None)
    importlib.import_module(f"afi.commands.{module}").register(commands)
    return typer.main.get_group(commands).commands


class _Commands(MutableMapping[str, Any]):
    """The root's commands by name, each built on first lookup (those registered beforehand as they are)."""

    def __init__(self, built: MutableMapping[str, Any]) -> None:
        self._built = dict(built)

    def __getitem__(self, name: str) -> Any:
        if name not in self._built and name in COMMANDS:
            self._built.update(_build(COMMANDS[name]))
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*COMMANDS, *self._built]))

    def __len__(self) -> int:
        return len({*COMMANDS, *self._built})


SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")
_COMPLETION_OPTIONS = ("--show-completion", "--install-completion")
_DETECT = "-"  # stands for the shell a completion option names when it is given alone


def _shell_named_or_detected(args: list[str]) -> list[str]:
    """Given ``afi``'s arguments, return them with :data:`_DETECT` after a completion option given alone.

    ``--show-completion`` and ``--install-completion`` take an optional shell; the parser knows only
    options that always or never take a value, so a bare one (last, or before another option) gets the
    placeholder here.
    """
    out: list[str] = []
    for i, arg in enumerate(args):
        if not arg.startswith("-") or arg == "--":  # the command: its own arguments are its business
            return [*out, *args[i:]]
        out.append(arg)
        if arg in _COMPLETION_OPTIONS and (i + 1 == len(args) or args[i + 1].startswith("-")):
            out.append(_DETECT)
    return out


def _completion_shell(value: str) -> str:
    """Given the shell named after a completion option (or :data:`_DETECT`), return the shell to serve.

    Detection reads the parent processes, which fails when no shell started ``afi`` (cron, a service,
    ``setsid``): the message then says to name the shell.
    """
    if value in SHELLS:
        return value
    if value != _DETECT:
        raise typer.BadParameter(f"{value!r} is not a shell afi completes: one of {', '.join(SHELLS)}")
    from typer._completion_shared import _get_shell_name

    detected = _get_shell_name()
    if detected not in SHELLS:
        raise typer.BadParameter(
            f"no shell afi completes ({', '.join(SHELLS)}) among the processes that started it: name one,"
            " e.g. --show-completion bash"
        )
    return detected


def _show_completion(ctx: typer.Context, value: str | None) -> None:
    if value is None or ctx.resilient_parsing:
        return
    from typer._completion_shared import get_completion_script

    typer.echo(get_completion_script(prog_name="afi", complete_var="_AFI_COMPLETE", shell=_completion_shell(value)))
    raise typer.Exit()


def _install_completion(ctx: typer.Context, value: str | None) -> None:
    if value is None or ctx.resilient_parsing:
        return
    from typer._completion_shared import install

    shell, path = install(shell=_completion_shell(value), prog_name="afi", complete_var="_AFI_COMPLETE")
    typer.echo(f"{shell} completion installed in {path}; it takes effect in a new terminal")
    raise typer.Exit()


class _Root(TyperGroup):
    """``afi`` itself: a group whose commands are built when looked up (listed, suggested, run)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Commands(self.commands)
        completion_init()  # the shells' completers, which answer _AFI_COMPLETE=complete_bash and the like

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _shell_named_or_detected(args))


app = typer.Typer(
    name="afi",
    cls=_Root,
    help="afi-memory: an agent's memory as a filesystem, through MCP, HTTP, FUSE and SSH.",
    no_args_is_help=True,
    # typer's completion options are flags that detect the shell and ignore one named after them: afi's
    # own (below) take an optional shell, so a script or service without a parent shell can name it
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's plain help, as sqlite-utils has: rich's panels cost -h as much again as all the rest, and
    # its markup took the "[default: …]" of --db and --root for tags and dropped them
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},  # every command inherits -h
)


def _register_all() -> None:
    """Register every command on :data:`app` now (tests drive ``app`` in-process with typer's runner)."""
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"afi-memory {__version__}")  # the package's version (pyproject.toml reads it from here)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit")
    ] = False,
    _install: Annotated[
        str | None,
        typer.Option(
            "--install-completion",
            callback=_install_completion,
            is_eager=True,
            expose_value=False,
            metavar="[SHELL]",
            help=f"Install completion for SHELL ({', '.join(SHELLS)}; the current shell when none is named)",
        ),
    ] = None,
    _show: Annotated[
        str | None,
        typer.Option(
            "--show-completion",
            callback=_show_completion,
            is_eager=True,
            expose_value=False,
            metavar="[SHELL]",
            help="Print the completion script for SHELL (the current shell when none is named)",
        ),
    ] = None,
) -> None:
    """afi-memory: an agent's memory as a filesystem."""


def main() -> None:
    app()
