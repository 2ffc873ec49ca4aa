"""The one server factory: ``afi serve`` over a store, on 127.0.0.1 only, in this process or in its own.

:func:`serve_store` is what fixtures call. By default it serves the app ``afi serve`` builds
(HTTP, MCP at /mcp, the web page, OAuth) on uvicorn in a thread of the test process: real sockets,
real HTTP, no process to start (the fast lane, ``make check``, runs these). With command-line
options, or ``process=True``, it runs the real CLI in a subprocess (``--port 0``), reads the address
it prints and waits until the manifest answers (:func:`start_afi_serve`). ``serve_app_in_thread``
runs any ASGI app (a binding under test) the same way. All are context managers; the fixtures in
``tests/conftest.py`` wrap them.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from tests.support.warm import AfiPopen

_LISTENING = "afi: listening on "


@dataclass
class AfiServer:
    """A running server: its base URL, its store, and tokens by name (empty when keyless)."""

    url: str
    db: Path | str
    root: Path
    tokens: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[str] | None = None


def _pump(stream: Any, lines: queue.Queue[str]) -> None:
    for line in iter(stream.readline, ""):
        lines.put(line)
    stream.close()


@contextmanager
def serve_store(db: Path | str, root: Path, *args: str, process: bool = False) -> Iterator[AfiServer]:
    """Serve ``db``/``root`` as ``afi serve`` does; yield the server once the manifest answers.

    In this process unless ``process`` is set or command-line ``args`` are given (those go to a real
    ``afi serve``): a test that reads the server's pid, kills it or reads what it prints asks for a process.
    """
    if process or args:
        with start_afi_serve(db, root, *args) as running:
            yield running
        return
    from afi.app.serve import AppSpec, Listen
    from afi.auth.owner import ensure_owner_token
    from afi.storage.database import is_postgres_url

    ensure_owner_token(db)  # as the command does before it serves
    app, _provider = AppSpec(db, root, mcp_stateless=is_postgres_url(str(db))).build()
    with _uvicorn_in_thread(Listen(port=0).config(app, timeout_graceful_shutdown=5)) as url:
        _await_ready(url, None, 30)
        yield AfiServer(url=url, db=db, root=root)


@contextmanager
def serve_with_keys(folder: Path, keys: dict[str, tuple[str, tuple[str, ...]]]) -> Iterator[AfiServer]:
    """Serve a new store in ``folder`` (``server.db``, ``server-files``) with a key per name in ``keys``
    (the space it holds, its scopes); the server's ``tokens`` map each name to its token."""
    from afi.auth.keys import KeyStore

    db, root = folder / "server.db", folder / "server-files"
    store = KeyStore(db)
    tokens = {name: store.create(space=space, scopes=scopes, name=name)[1] for name, (space, scopes) in keys.items()}
    store.close()
    with serve_store(db, root) as running:
        running.tokens = tokens
        yield running


@contextmanager
def start_afi_serve(db: Path | str, root: Path, *args: str, timeout: float = 60.0) -> Iterator[AfiServer]:
    """Run ``afi serve --port 0`` on 127.0.0.1 over ``db``/``root``; yield it once it answers."""
    cmd = [sys.executable, "-c", "from afi.cli import main; main()", "serve", "--host", "127.0.0.1", "--port", "0"]
    cmd += ["--db", str(db), "--root", str(root), *args]
    proc = AfiPopen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    errors: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
    threading.Thread(target=_pump, args=(proc.stderr, errors), daemon=True).start()
    try:
        url = _await_address(proc, lines, errors, timeout)
        _await_ready(url, proc, timeout)
        yield AfiServer(url=url, db=db, root=root, process=proc)
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen[str]) -> None:
    """Ask a child process to stop (SIGTERM), and kill it if it has not within 10 s."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _drain(errors: queue.Queue[str]) -> str:
    out = []
    while not errors.empty():
        out.append(errors.get_nowait())
    return "".join(out)


def _await_address(
    proc: subprocess.Popen[str], lines: queue.Queue[str], errors: queue.Queue[str], timeout: float
) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            if proc.poll() is not None:
                time.sleep(0.2)
                raise RuntimeError(f"afi serve exited with {proc.returncode}: {_drain(errors)}") from None
            continue
        if line.startswith(_LISTENING):
            return line[len(_LISTENING) :].split()[0]
    raise RuntimeError(f"afi serve did not announce its address in {timeout} s: {_drain(errors)}")


def _await_ready(url: str, proc: subprocess.Popen[str] | None, timeout: float) -> None:
    """Wait until the manifest answers, then until the doors that load after it have (a request to one of
    their paths waits for them): a test starts on a server that is done starting, not still loading."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/.afi/manifest.json", timeout=5).status_code == 200:
                loaded_after = url + "/.well-known/oauth-protected-resource/mcp"  # 404 when there is no MCP door
                httpx.get(loaded_after, timeout=max(1.0, deadline - time.monotonic()))
                return
        except httpx.TransportError:
            pass
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"afi serve exited with {proc.returncode}")
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer in {timeout} s")


@contextmanager
def serve_app_in_thread(app: Any, *, lifespan: str = "off") -> Iterator[str]:
    """Run an ASGI app on uvicorn in a thread, on 127.0.0.1 with a free port; yield its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan=lifespan)
    with _uvicorn_in_thread(config) as url:
        yield url


@contextmanager
def _uvicorn_in_thread(config: uvicorn.Config) -> Iterator[str]:
    """Run uvicorn with ``config`` in a daemon thread; yield its base URL; stop it at the block's end."""
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        assert not thread.is_alive(), "the server did not shut down"
