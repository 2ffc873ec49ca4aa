"""``afi serve``: the HTTP/JSON binding (with MCP at /mcp and the web page at /) on uvicorn, over the memory provider.

One process by default; with ``workers`` > 1, N processes share one listening socket (uvicorn's
supervisor binds it in the parent and spawns the workers), each with its own provider on the same
store. The parent announces the address once: ``afi: listening on http://…``. A worker ends when its
supervisor does, even when the supervisor is killed (``kill -9``) and cannot stop it.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import signal
import socket
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from rich.console import Console
from starlette.applications import Starlette
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import Multiprocess
from uvicorn.supervisors.multiprocess import Process

from afi.auth.oauth.client_policy import ClientMetadataPolicy
from afi.auth.oauth.issuer import IssuerConfig
from afi.auth.oauth.paths import MCP_PATHS, OAUTH_PATHS
from afi.auth.oauth.resource import name_servers
from afi.auth.ratelimit import RateLimiter
from afi.bindings.http import Limits, ServerConfig, create_app, default_max_connections
from afi.bindings.http.deferred import DeferredDoors
from afi.bindings.web import mount_web
from afi.errors import Conflict
from afi.providers.memory.provider import MemoryProvider
from afi.storage.database import store_label

from .local import load_embedder_in_background, open_provider

__all__ = [
    "WORKER_SILENCE_SECONDS",
    "AppSpec",
    "Listen",
    "check_port",
    "end_with_supervisor",
    "open_server",
    "prebuild",
    "serve_workers",
]

stdout = Console(highlight=False)
# How long a worker may leave its supervisor's health check unanswered before it is killed and spawned
# again. uvicorn's 5 s is shorter than a worker's imports on a busy machine (12 s seen on 2 shared
# cores): every worker was killed before it served, for ever. A hung worker is replaced after this.
WORKER_SILENCE_SECONDS = 60


@dataclass(frozen=True)
class AppSpec:
    """What ``afi serve`` serves; calling it builds the ASGI app (uvicorn's factory, once in each worker)."""

    db: Path | str
    root: Path
    space: str | None = None
    rate: float = 0.0
    burst: int = 100
    mcp: bool = True
    mcp_stateless: bool = False
    tool_names: str = "both"
    issuer: IssuerConfig | None = None  # accept this identity provider's JWTs (afi serve --issuer)
    oauth: bool = True  # serve the built-in authorization server (without an issuer)
    client_metadata: ClientMetadataPolicy = field(default_factory=ClientMetadataPolicy)  # CIMD fetches
    embedder: str | None = None  # afi serve --embedder (else AFI_EMBEDDER; else the store's, or the default)

    @property
    def builtin_oauth(self) -> bool:
        """Whether this server is its own authorization server: asked for, and no issuer named instead."""
        return self.oauth and self.issuer is None

    def build(self, *, wait: bool = False) -> tuple[FastAPI, MemoryProvider]:
        """Open the provider over the store and return the app serving it, with the provider.

        The MCP endpoint and the built-in authorization server load once the app has started, so the
        other doors answer meanwhile (:class:`~afi.bindings.http.deferred.DeferredDoors`); ``wait``
        loads them before it serves.
        """
        provider = open_provider(self.db, self.root, keys=True, issuer=self.issuer, embedder=self.embedder)
        provider.check_embedder(self.space or "default")  # refused now, not at the first request
        limiter = RateLimiter(self.rate, self.burst) if self.rate > 0 else None
        spaces = {self.space} if self.space else None
        app = create_app(provider, rate_limit=limiter, allowed_spaces=spaces, default_space=self.space)
        mount_web(app)
        builtin = self.builtin_oauth
        name_servers(app, issuer=self.issuer.issuer if self.issuer else None, builtin=builtin)
        paths = (OAUTH_PATHS if builtin else ()) + (MCP_PATHS if self.mcp else ())
        if paths:
            named = (("the MCP endpoint", self.mcp), ("the authorization server", builtin))
            what = " and ".join(name for name, served in named if served)
            doors = partial(self.doors, provider, limiter)
            DeferredDoors(doors, paths, what=what, wait=wait).mount(app)
        else:
            load_embedder_in_background(provider)
        return app, provider

    def doors(self, provider: MemoryProvider, limiter: RateLimiter | None) -> Starlette:
        """The doors made of the MCP SDK (the MCP endpoint, the built-in authorization server) on an app of
        their own, whose routes the served app hands requests to."""
        from .mcp import mcp_http
        from .oauth import mount_auth

        doors = Starlette()
        mount_auth(
            doors, self.db, space=self.space, issuer=self.issuer, builtin=self.builtin_oauth,
            client_metadata=self.client_metadata,
        )  # fmt: skip
        if self.mcp:
            from afi.bindings.mcp import mount_mcp

            http = mcp_http(
                provider, self.db, tool_names=self.tool_names, stateless=self.mcp_stateless, rate_limit=limiter,
                space=self.space,
            )  # fmt: skip
            mount_mcp(doors, http)
        load_embedder_in_background(provider)  # after the doors: they answer first
        return doors

    def __call__(self) -> FastAPI:
        end_with_supervisor()
        try:
            return self.build()[0]
        except Exception as err:  # a worker that cannot start stops the supervisor, not a restart loop
            print(f"afi: a worker could not start: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
            sys.exit(STARTUP_FAILURE)


def end_with_supervisor() -> None:
    """In a worker process (uvicorn's supervisor spawned it), stop this process as SIGTERM would once the
    supervisor is gone; elsewhere, do nothing.

    uvicorn's supervisor stops its workers when it is asked to stop; killed (``kill -9``, the OOM
    killer), it cannot, and its workers kept the port and the store open for ever. The worker's
    end of multiprocessing's pipe from the supervisor (its ``sentinel``) becomes readable when the
    supervisor's process ends, however it ends: a thread waits on it, then signals this process,
    whose server stops as it does on SIGTERM (no new connections, requests in flight finish).
    """
    supervisor = multiprocessing.parent_process()
    if supervisor is None:
        return

    def watch() -> None:
        supervisor.join()
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="afi-supervisor-watch", daemon=True).start()


@dataclass(frozen=True)
class Listen:
    """Where and how the HTTP server listens."""

    host: str = "127.0.0.1"
    port: int = 8765
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int | None = None  # default: the descriptor limit - 256

    def config(self, app: Any, **kw: Any) -> ServerConfig:
        limits = Limits(self.header_timeout, self.body_timeout, self.max_connections or default_max_connections())
        options: dict[str, Any] = {"host": self.host, "port": self.port, "log_level": "warning", "lifespan": "on"}
        return ServerConfig(app, limits=limits, **options, **kw)


def check_port(listen: Listen) -> None:
    """Given where to listen, raise when another process holds that address (uvicorn would only log
    ``[Errno 98]``); port 0 always binds.

    Raises:
        Conflict: the port is in use on that host.
    """
    if listen.port == 0:
        return
    try:
        found = socket.getaddrinfo(listen.host, listen.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return  # a host that does not resolve: uvicorn says so in its own words
    family, kind, proto, _, address = found[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no conflict
        try:
            probe.bind(address)
        except OSError as err:
            if err.errno != errno.EADDRINUSE:
                return
            raise Conflict(
                f"port {listen.port} on {listen.host} is in use (another afi serve?): pick another with --port"
            ) from None


def _announce(name: tuple[Any, ...], spec: AppSpec) -> None:
    host, port = name[0], name[1]
    shown = f"[{host}]" if ":" in host else host
    stdout.print(f"afi: listening on http://{shown}:{port} (db {store_label(spec.db)}, root {spec.root})", markup=False)
    stdout.file.flush()


def prebuild(spec: AppSpec) -> None:
    """Build the app and its doors once, in a throwaway thread (whose SQLite connections end with it),
    and drop them.

    Before workers start: a store that cannot open fails here, and its tables exist before the
    workers race to create them.
    """

    def build() -> None:
        _, provider = spec.build()
        spec.doors(provider, None)

    with ThreadPoolExecutor(1) as once:
        once.submit(build).result()


def serve_workers(spec: AppSpec, listen: Listen, workers: int) -> int:
    """Bind and listen in this process, announce, then run uvicorn's supervisor of ``workers`` workers.

    Returns the exit status: 1 when a worker could not start, 2 when the port is in use, else 0.
    """
    try:
        check_port(listen)
    except Conflict as err:
        print(f"afi: {err.code}: {err.message}", file=sys.stderr, flush=True)
        return 2
    config = listen.config(spec, workers=workers, factory=True, timeout_worker_healthcheck=WORKER_SILENCE_SECONDS)
    sockets = _worker_sockets(config, workers)
    _announce(sockets[0].getsockname(), spec)
    supervisor = _OneSocketEach(config, sockets=sockets)
    supervisor.run()
    if any(worker.exitcode == STARTUP_FAILURE for worker in supervisor.processes):
        return 1
    return 0


def _worker_sockets(config: uvicorn.Config, workers: int) -> list[socket.socket]:
    """One listening socket per worker, all on one address with SO_REUSEPORT, so the kernel spreads
    new connections over the workers. A single shared socket let one worker's accept loop take a whole
    burst of keep-alive connections while the other stayed idle."""
    first = config.bind_socket()
    if not hasattr(socket, "SO_REUSEPORT") or first.family not in (socket.AF_INET, socket.AF_INET6):
        first.listen(config.backlog)
        return [first]
    address = first.getsockname()
    first.close()
    sockets = []
    for _ in range(workers):
        sock = socket.socket(first.family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(config.backlog)
        sock.set_inheritable(True)
        sockets.append(sock)
    return sockets


class _OneSocketEach(Multiprocess):
    """uvicorn's supervisor, handing worker ``i`` (and its replacements) listening socket ``i``."""

    def init_processes(self) -> None:
        for index in range(self.processes_num):
            process = Process(self.config, self._socket_of(index))
            process.start()
            self.processes.append(process)

    def keep_subprocess_alive(self) -> None:
        if self.should_exit.is_set():
            return
        for index, process in enumerate(self.processes):
            if process.is_alive(timeout=self.config.timeout_worker_healthcheck):
                continue
            process.kill()
            process.join()
            if process.exitcode == STARTUP_FAILURE or self.should_exit.is_set():
                self.should_exit.set()  # broken app, store or socket: every restart would fail the same way
                return
            replacement = Process(self.config, self._socket_of(index))
            replacement.start()
            self.processes[index] = replacement

    def _socket_of(self, index: int) -> list[socket.socket]:
        return [self.sockets[index % len(self.sockets)]]


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints where it really listens (port 0 picks one) once it is up."""

    def __init__(self, config: Any, spec: AppSpec) -> None:
        super().__init__(config)
        self._afi_spec = spec

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        for listener in getattr(self, "servers", []):
            for sock in listener.sockets:
                _announce(sock.getsockname(), self._afi_spec)


def open_server(spec: AppSpec, listen: Listen) -> tuple[uvicorn.Server, MemoryProvider]:
    """Build the app and return the (not yet started) uvicorn server of one process, with the provider.

    ``server.run()`` serves until SIGINT or SIGTERM; :func:`afi.app.ssh.run_beside` runs SSH beside it.

    Raises:
        Conflict: the port is in use.
    """
    check_port(listen)
    app, provider = spec.build()
    return _AnnouncingServer(listen.config(app), spec), provider
