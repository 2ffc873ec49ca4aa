"""``afi serve``: the HTTP/JSON binding on uvicorn, over the embedded store."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ..door import is_loopback_host
from .errors import afi_errors, stderr
from .options import DbOption, RootOption, resolve_db, resolve_root

__all__ = ["is_loopback", "register"]

stdout = Console(highlight=False)


is_loopback = is_loopback_host


def serve(
    db: DbOption = None,
    root: RootOption = None,
    host: Annotated[str, typer.Option(help="Address to bind; non-loopback needs an API key first")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one)")] = 8765,
    space: Annotated[
        str | None, typer.Option("--space", envvar="AFI_SPACE", help="Serve only this space (the keyless owner's too)")
    ] = None,
    rate: Annotated[float, typer.Option(help="Requests per second per principal (0: no limit)")] = 0.0,
    burst: Annotated[int, typer.Option(help="Requests a principal may burst")] = 100,
    mcp: Annotated[bool, typer.Option("--mcp/--no-mcp", help="Also serve MCP (Streamable HTTP) at /mcp")] = True,
    mcp_stateless: Annotated[
        bool, typer.Option("--mcp-stateless", help="Serve /mcp without sessions (clients that keep none)")
    ] = False,
    tool_names: Annotated[
        str, typer.Option("--tool-names", help="MCP tool names: dotted, underscore or both")
    ] = "both",
    ssh: Annotated[bool, typer.Option("--ssh", help="Also serve SSH (shell, sftp, afi subsystem): see afi ssh")] = (
        False
    ),
    ssh_port: Annotated[int, typer.Option(help="SSH port, with --ssh (0 picks a free one)")] = 2222,
    authorized_keys: Annotated[
        Path | None, typer.Option("--authorized-keys", help="SSH authorized-keys file, with --ssh")
    ] = None,
    host_key: Annotated[Path | None, typer.Option("--host-key", help="SSH host key file, with --ssh")] = None,
) -> None:
    """Serve the memory over HTTP/JSON (routes /afi/…, manifest at /.afi/manifest.json, docs at /docs) and MCP
    (Streamable HTTP at /mcp)."""
    from afi.providers.memory.keys import KeyStore

    db_path = resolve_db(db)
    keys = KeyStore(db_path)
    if not is_loopback(host) and keys.count() == 0:
        stderr.print(
            f"afi: refusing to listen on {host}: no API key exists, so anyone who can reach it would own the "
            "memory. Create one first (afi token create --scope afi:write) or bind 127.0.0.1.",
            markup=False,
        )
        raise typer.Exit(2)
    import uvicorn

    from afi.bindings.http import create_app
    from afi.providers.memory.provider import MemoryProvider
    from afi.ratelimit import RateLimiter

    root_path = resolve_root(root)
    with afi_errors():
        provider = MemoryProvider(db_path, root_path, keys=keys)
        limiter = RateLimiter(rate, burst) if rate > 0 else None
        app = create_app(
            provider,
            rate_limit=limiter,
            allowed_spaces={space} if space else None,
            default_space=space,
        )
        if mcp:
            from afi.bindings.mcp_http import mount_mcp

            from .mcp import mcp_http

            if tool_names not in ("dotted", "underscore", "both"):
                raise typer.BadParameter("use dotted, underscore or both", param_hint="--tool-names")
            names: Any = tool_names
            http = mcp_http(
                provider, db_path, tool_names=names, stateless=mcp_stateless, rate_limit=limiter, space=space
            )
            mount_mcp(app, http)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    server = _AnnouncingServer(config, db_path, root_path)
    if ssh:
        from .ssh import SshOptions, run_beside

        with afi_errors():
            run_beside(server.server, provider, db_path, SshOptions(host, ssh_port, authorized_keys, host_key))
        return
    server.run()


class _AnnouncingServer:
    """A uvicorn server that prints where it really listens (port 0 picks one) once it is up."""

    def __init__(self, config: Any, db: Path, root: Path) -> None:
        import uvicorn

        announce = self._announce

        class Server(uvicorn.Server):
            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets)
                for listener in getattr(self, "servers", []):
                    for sock in listener.sockets:
                        announce(sock.getsockname())

        self.server = Server(config)
        self.db, self.root = db, root

    def _announce(self, name: tuple[Any, ...]) -> None:
        host, port = name[0], name[1]
        shown = f"[{host}]" if ":" in host else host
        stdout.print(f"afi: listening on http://{shown}:{port} (db {self.db}, root {self.root})", markup=False)
        stdout.file.flush()

    def run(self) -> None:
        self.server.run()


def register(app: typer.Typer) -> None:
    """Add ``afi serve`` to ``app``."""
    app.command("serve")(serve)
