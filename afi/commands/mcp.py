"""``afi mcp``: the MCP binding over stdio (nothing but protocol on stdout; logs go to stderr).

The binding is assembled in :mod:`afi.app.mcp` (a fabric of the caller's space per MCP session,
receipts in the store file); ``afi serve`` mounts the same binding at ``/mcp``.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from .errors import afi_errors
from .options import DbOption, RootOption, resolve_db, resolve_root

__all__ = ["register"]

TOOL_NAMES_HELP = "Offer tools dotted (afi.stat), underscored (afi_stat, for clients that reject dots) or both"


def mcp(
    db: DbOption = None,
    root: RootOption = None,
    space: Annotated[
        str | None, typer.Option("--space", envvar="AFI_SPACE", help="Space of the keyless local owner")
    ] = None,
    tool_names: Annotated[str, typer.Option("--tool-names", help=TOOL_NAMES_HELP)] = "both",
    discovery: Annotated[
        bool, typer.Option("--discovery", help="Offer only search_tools, get_tool_schema and call_tool")
    ] = False,
) -> None:
    """Serve the memory to an MCP client over stdio (afi.* tools, memory.* tools, afi:// resources).

    With AFI_TOKEN set, calls are made as that API key; without it, as the local owner (whoever can
    run this command can read the store file anyway).
    """
    if tool_names not in ("dotted", "underscore", "both"):
        raise typer.BadParameter("use dotted, underscore or both", param_hint="--tool-names")
    import logging

    from afi.app.mcp import open_mcp_stdio

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

    db_path = resolve_db(db)
    names: Any = tool_names
    with afi_errors():
        stdio = open_mcp_stdio(db_path, resolve_root(root, db_path), space=space, tool_names=names, discovery=discovery)
    stdio.run()


def register(app: typer.Typer) -> None:
    """Add ``afi mcp`` to ``app``."""
    app.command("mcp")(mcp)
