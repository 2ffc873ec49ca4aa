"""``afi serve``: the HTTP/JSON binding (and MCP at /mcp) on uvicorn, over the embedded store.

One process by default; ``--workers N`` runs N processes that share one listening socket (uvicorn's
supervisor binds it in the parent and spawns the workers), each with its own provider on the same
store. The parent announces the address once: ``afi: listening on http://…``.
"""

from __future__ import annotations

import socket
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console

from ..door import is_loopback_host
from .errors import afi_errors, stderr
from .options import DbOption, RootOption, resolve_db, resolve_root

if TYPE_CHECKING:
    from fastapi import FastAPI

    from afi.bindings.http import ServerConfig
    from afi.providers.memory.provider import MemoryProvider

__all__ = ["AppSpec", "is_loopback", "register"]

stdout = Console(highlight=False)


is_loopback = is_loopback_host

WORKERS_HELP = (
    "Worker processes, each with its own provider on the same store. With more than one, /mcp is "
    "stateless (a session would live in one worker's memory), --rate counts per worker, and --ssh is refused"
)
MAX_CONNECTIONS_HELP = "Open connections per process; more are answered 503 (default: the descriptor limit - 256)"


@dataclass(frozen=True)
class AppSpec:
    """What ``afi serve`` serves; calling it builds the ASGI app (uvicorn's factory, once in each worker)."""

    db: Path
    root: Path
    space: str | None = None
    rate: float = 0.0
    burst: int = 100
    mcp: bool = True
    mcp_stateless: bool = False
    tool_names: str = "both"

    def build(self) -> tuple[FastAPI, MemoryProvider]:
        """Open the provider over the store and return the app serving it, with the provider."""
        from afi.bindings.http import create_app
        from afi.providers.memory.keys import KeyStore
        from afi.providers.memory.provider import MemoryProvider
        from afi.ratelimit import RateLimiter

        from .mcp import mcp_http

        provider = MemoryProvider(self.db, self.root, keys=KeyStore(self.db))
        limiter = RateLimiter(self.rate, self.burst) if self.rate > 0 else None
        spaces = {self.space} if self.space else None
        app = create_app(provider, rate_limit=limiter, allowed_spaces=spaces, default_space=self.space)
        if self.mcp:
            from afi.bindings.mcp import mount_mcp

            names: Any = self.tool_names
            http = mcp_http(
                provider, self.db, tool_names=names, stateless=self.mcp_stateless, rate_limit=limiter, space=self.space
            )
            mount_mcp(app, http)
        return app, provider

    def __call__(self) -> FastAPI:
        from uvicorn.config import STARTUP_FAILURE

        try:
            return self.build()[0]
        except Exception as err:  # a worker that cannot start stops the supervisor, not a restart loop
            print(f"afi: a worker could not start: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
            sys.exit(STARTUP_FAILURE)


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
    workers: Annotated[int, typer.Option(min=1, help=WORKERS_HELP)] = 1,
    header_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds a client has to send a request's headers (then 408)")
    ] = 10.0,
    body_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds a request body may pause between two chunks (then closed)")
    ] = 30.0,
    max_connections: Annotated[int | None, typer.Option(min=1, help=MAX_CONNECTIONS_HELP, show_default=False)] = None,
    mcp: Annotated[bool, typer.Option("--mcp/--no-mcp", help="Also serve MCP (Streamable HTTP) at /mcp")] = True,
    mcp_stateless: Annotated[
        bool | None,
        typer.Option(
            "--mcp-stateless/--mcp-stateful",
            help="Serve /mcp without sessions (default: stateful; stateless with --workers > 1)",
            show_default=False,
        ),
    ] = None,
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

    if tool_names not in ("dotted", "underscore", "both"):
        raise typer.BadParameter("use dotted, underscore or both", param_hint="--tool-names")
    if workers > 1 and ssh:
        _refuse("--ssh runs in one process: use --workers 1 with --ssh, or run 'afi ssh' beside 'afi serve --workers'")
    if workers > 1 and mcp and mcp_stateless is False:
        _refuse("--mcp-stateful needs --workers 1: a session lives in the memory of the worker that opened it")
    db_path = resolve_db(db)
    keys = KeyStore(db_path)
    no_keys = keys.count() == 0
    keys.close()
    if not is_loopback(host) and no_keys:
        _refuse(
            f"refusing to listen on {host}: no API key exists, so anyone who can reach it would own the "
            "memory. Create one first (afi token create --scope afi:write) or bind 127.0.0.1."
        )
    from afi.bindings.http import Limits, ServerConfig, default_max_connections

    root_path = resolve_root(root)
    stateless = mcp_stateless if mcp_stateless is not None else workers > 1
    spec = AppSpec(db_path, root_path, space, rate, burst, mcp, stateless, tool_names)
    limits = Limits(header_timeout, body_timeout, max_connections or default_max_connections())
    options: dict[str, Any] = {"host": host, "port": port, "log_level": "warning", "lifespan": "on"}
    if workers > 1:
        # Built once here first, so a store that cannot open fails before any worker starts and its tables
        # exist before the workers race to create them; in a thread, whose SQLite connections end with it.
        with afi_errors(), ThreadPoolExecutor(1) as once:
            once.submit(spec.build).result()
        _serve_workers(ServerConfig(spec, limits=limits, workers=workers, factory=True, **options), spec)
        return
    with afi_errors():
        app, provider = spec.build()
    server = _AnnouncingServer(ServerConfig(app, limits=limits, **options), spec)
    if ssh:
        from .ssh import SshOptions, run_beside

        with afi_errors():
            run_beside(server.server, provider, db_path, SshOptions(host, ssh_port, authorized_keys, host_key))
        return
    server.run()


def _refuse(message: str) -> NoReturn:
    stderr.print(f"afi: {message}", markup=False)
    raise typer.Exit(2)


def _announce(name: tuple[Any, ...], spec: AppSpec) -> None:
    host, port = name[0], name[1]
    shown = f"[{host}]" if ":" in host else host
    stdout.print(f"afi: listening on http://{shown}:{port} (db {spec.db}, root {spec.root})", markup=False)
    stdout.file.flush()


def _serve_workers(config: ServerConfig, spec: AppSpec) -> None:
    """Bind and listen in this process, announce, then run uvicorn's supervisor of ``config.workers`` workers."""
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    sock = config.bind_socket()
    sock.listen(config.backlog)  # connections wait in the backlog until a worker takes them
    _announce(sock.getsockname(), spec)
    supervisor = Multiprocess(config, sockets=[sock])
    supervisor.run()
    if any(worker.exitcode == STARTUP_FAILURE for worker in supervisor.processes):
        raise typer.Exit(1)


class _AnnouncingServer:
    """A uvicorn server that prints where it really listens (port 0 picks one) once it is up."""

    def __init__(self, config: Any, spec: AppSpec) -> None:
        import uvicorn

        class Server(uvicorn.Server):
            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets)
                for listener in getattr(self, "servers", []):
                    for sock in listener.sockets:
                        _announce(sock.getsockname(), spec)

        self.server = Server(config)

    def run(self) -> None:
        self.server.run()


def register(app: typer.Typer) -> None:
    """Add ``afi serve`` to ``app``."""
    app.command("serve")(serve)
