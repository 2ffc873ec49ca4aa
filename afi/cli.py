"""``afi``: one CLI for every door. Each command opens the store, calls one thing, renders it.

Command modules live in :mod:`afi.commands`; each exposes ``register(app)``. A command turns an
:class:`~afi.errors.AfiError` into ``afi: <path>: <code>: <message>`` on stderr and exit code 2.
"""

from __future__ import annotations

import importlib

import typer

__all__ = ["app", "main"]

app = typer.Typer(
    name="afi",
    help="afi-memory: an agent's memory as a filesystem, through MCP, HTTP, FUSE and SSH.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Modules that add commands; a module is listed here once it exists.
COMMAND_MODULES: tuple[str, ...] = (
    "afi.commands.memory",
    "afi.commands.serve",
    "afi.commands.token",
    "afi.commands.audit",
    "afi.commands.db",
    "afi.commands.conformance",
    "afi.commands.mount",
    "afi.commands.mcp",
    "afi.commands.ssh",
    "afi.commands.session",
    "afi.commands.search",
)


def _register_all() -> None:
    for name in COMMAND_MODULES:
        module = importlib.import_module(name)
        module.register(app)


@app.callback()
def _root() -> None:
    """afi-memory: an agent's memory as a filesystem."""


def main() -> None:
    _register_all()
    app()
