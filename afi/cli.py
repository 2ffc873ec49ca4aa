"""``afi``: one CLI for every door. Each command opens the store, calls one thing, renders it.

Command modules live in :mod:`afi.commands`; each exposes ``register(app)``. A command turns an
:class:`~afi.errors.AfiError` into ``afi: <path>: <code>: <message>`` on stderr and exit code 2.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Annotated

import typer

__all__ = ["app", "main"]

app = typer.Typer(
    name="afi",
    help="afi-memory: an agent's memory as a filesystem, through MCP, HTTP, FUSE and SSH.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion and --show-completion for bash, zsh, fish and PowerShell
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},  # every command inherits -h
)

# Modules that add commands; a module is listed here once it exists.
COMMAND_MODULES: tuple[str, ...] = (
    "afi.commands.memory",
    "afi.commands.serve",
    "afi.commands.token",
    "afi.commands.auth",
    "afi.commands.audit",
    "afi.commands.db",
    "afi.commands.conformance",
    "afi.commands.mount",
    "afi.commands.mcp",
    "afi.commands.ssh",
    "afi.commands.session",
    "afi.commands.search",
    "afi.commands.files",
    "afi.commands.snapshot",
    "afi.commands.diff",
    "afi.commands.bundle",
    "afi.commands.gc",
    "afi.commands.space",
)


def _register_all() -> None:
    for name in COMMAND_MODULES:
        module = importlib.import_module(name)
        module.register(app)


def _version(value: bool) -> None:
    if value:
        try:
            version = metadata.version("afi-memory")
        except metadata.PackageNotFoundError:  # run from a source tree that was never installed
            version = "unknown (not installed)"
        typer.echo(f"afi-memory {version}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit")
    ] = False,
) -> None:
    """afi-memory: an agent's memory as a filesystem."""


def main() -> None:
    _register_all()
    app()
