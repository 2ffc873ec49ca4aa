"""The warm launcher: a Python that has imported the ``afi`` CLI and forks a child per ``afi`` command line.

:mod:`tests.support.warm` starts one per pytest worker, as ``python -c BOOT this-file FD`` (never imported:
its top level is the top level of every child). Over the unix socket FD, each request brings a command
line, the environment, working directory and session of the process it stands for, and its standard
streams (descriptors, with SCM_RIGHTS) along with a socket for the answers. The launcher forks; the child
puts on what a fresh ``afi`` process would have (its descriptors 0-2 and nothing else, ``sys.argv``,
``sys.executable``, the environment, ``sys.std*`` opened on the new descriptors) and returns here, where
the CLI runs at the top level, so the interpreter ends it as it ends a real one (``SystemExit``, a
traceback, ``atexit``, threads joined, streams flushed). The launcher answers with the child's pid and
a pidfd of it, and once it has reaped the child, its wait status.

Only start-up is shared. The launcher starts no thread and opens no store before it forks (numpy's
OpenBLAS stops its thread pool around a fork by itself); what a command builds, it builds in its child.
It changes no signal disposition, so a child has the interpreter's own (SIGPIPE and SIGXFSZ ignored,
SIGINT raising KeyboardInterrupt), as an exec'd ``afi`` has; it waits for its children on pidfds, with
no SIGCHLD handler for a child to inherit.
"""

from __future__ import annotations

import array
import contextlib
import gc
import importlib
import io
import json
import os
import selectors
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, NoReturn

# What commands import, loaded at start (the CLI, the provider and what its verbs load when first used);
# what a server's command imports besides, loaded before its first child forks (a second or so each, and
# most workers start few servers or none).
PRELOAD = (
    "afi.cli",
    "afi.app.local",
    "afi.app.bundle",
    "afi.app.workspace",
    "afi.app.db",
    "afi.app.doctor",
    "afi.auth.keys",
    "afi.auth.owner",
    "afi.auth.oauth.issuer",
    "afi.storage.peek",
    "afi.providers.memory.fabric.vectors",
    "afi.providers.memory.fabric.fold_search",
    "afi.providers.memory.fabric.pg_vectors",
    "afi.providers.memory.importers.foreign",
    "numpy",
    "rich.progress",
)
PRELOAD_FOR = {
    "serve": ("afi.app.serve",),
    "ssh": ("afi.app.ssh", "afi.bindings.ssh"),
    "mount": ("afi.app.mount", "afi.bindings.fuse"),
    "mcp": ("afi.app.mcp",),
}
MAX_MESSAGE = 1 << 20
TEMPDIR_AT_START = tempfile.tempdir  # an import may fill it from this process's TMPDIR (asyncssh does)


@dataclass
class Request:
    """One ``afi`` command line to run, and the process it stands for."""

    argv: list[str]  # sys.argv of that process
    orig_argv: list[str]
    executable: str
    path0: str  # sys.path[0]: the script's folder, or "" for ``python -c``
    script: str | None  # __main__.__file__ when the command line runs the console script
    env: dict[str, str]
    cwd: str
    new_session: bool


class Launcher:
    """The requests' loop; :meth:`serve` returns in a child only, with its request."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.selector = selectors.DefaultSelector()
        self.selector.register(control, selectors.EVENT_READ)
        self.children: dict[int, tuple[int, socket.socket]] = {}  # pid -> (pidfd, answer socket)
        self.preloaded: set[str] = set()

    def serve(self) -> Request:
        while True:
            for key, _ in self.selector.select():
                if key.fileobj is self.control:
                    request = self._receive()
                    if request is not None:
                        return request
                else:
                    self._reap(key.data)

    def _receive(self) -> Request | None:
        fds = array.array("i")
        try:
            data, ancdata, _flags, _addr = self.control.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(4 * fds.itemsize))
        except ConnectionResetError:
            data, ancdata = b"", []
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        if not data:
            self._shutdown()
        answer = socket.socket(fileno=fds[0])
        stdio = list(fds[1:4])
        request = Request(**json.loads(data))
        self._preload(request.argv[1:])
        return self._fork(request, answer, stdio)

    def _preload(self, args: list[str]) -> None:
        command = next((arg for arg in args if not arg.startswith("-")), "")
        for module in PRELOAD_FOR.get(command, ()):
            if module not in self.preloaded:
                self.preloaded.add(module)
                try:
                    importlib.import_module(module)
                except Exception:  # the child imports it again and fails in its own words
                    continue

    def _fork(self, request: Request, answer: socket.socket, stdio: list[int]) -> Request | None:
        """Fork a child for ``request``: in the child, return the request; here, answer and return None."""
        sys.stdout.flush()
        sys.stderr.flush()
        # Out of the collector's sight: a child's collections (its last, as it ends, above all) would write
        # to every object the launcher made, and copy every page of them.
        gc.freeze()
        failed_read, failed_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(failed_read)
            try:
                self._close_all(answer)
                _become(request, stdio)
            except BaseException as err:
                os.write(failed_write, f"{type(err).__name__}: {err}".encode())
                os._exit(127)
            os.close(failed_write)
            return request
        os.close(failed_write)
        for fd in stdio:
            os.close(fd)
        with os.fdopen(failed_read, "rb") as failed:
            why = failed.read()
        if why:
            os.waitpid(pid, 0)
            _send(answer, {"error": why.decode("utf-8", "replace")})
            answer.close()
            return None
        pidfd = os.pidfd_open(pid)
        _send(answer, {"pid": pid}, [pidfd])
        self.children[pid] = (pidfd, answer)
        self.selector.register(pidfd, selectors.EVENT_READ, pid)
        return None

    def _reap(self, pid: int) -> None:
        pidfd, answer = self.children.pop(pid)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        _send(answer, {"status": status})
        answer.close()

    def _close_all(self, answer: socket.socket) -> None:
        """In a child: close what the launcher holds, so the child has only what a new process has."""
        self.selector.close()
        self.control.close()
        answer.close()
        for pidfd, other in self.children.values():
            os.close(pidfd)
            other.close()
        self.children.clear()

    def _shutdown(self) -> NoReturn:
        """The worker has gone (or said goodbye): kill the children still running, reap them, and end."""
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):  # unreaped, its pid is still its own
                os.kill(pid, signal.SIGKILL)
            self._reap(pid)
        sys.exit(0)


def _send(answer: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    try:
        if fds:
            answer.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        else:
            answer.send(data)
    except OSError:  # the worker stopped listening for this child (it went, or dropped its Popen)
        pass


def _become(request: Request, stdio: list[int]) -> None:
    """In a child: become the process ``request`` stands for, as far as a fresh interpreter would differ."""
    if request.new_session:
        os.setsid()
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
    for fd in set(stdio):
        if fd > 2:
            os.close(fd)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    time.tzset()
    tempfile.tempdir = TEMPDIR_AT_START
    sys.stdin, sys.stdout, sys.stderr = (_stdio(fd, old) for fd, old in enumerate((sys.stdin, sys.stdout, sys.stderr)))
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr  # type: ignore[misc]
    sys.argv, sys.orig_argv, sys.executable = request.argv, request.orig_argv, request.executable
    sys.path[0] = request.path0
    main = sys.modules["__main__"]
    if request.script is not None:
        main.__file__ = request.script
    with open("/proc/self/comm", "w", encoding="utf-8") as comm:  # what ps and top call it: the file exec'd
        comm.write(os.path.basename(request.script or request.executable)[:15])
    multiprocessing = sys.modules.get("multiprocessing")
    if multiprocessing is not None:  # its authentication key is made at import: each process has its own
        multiprocessing.current_process().authkey = os.urandom(32)


def _stdio(fd: int, old: Any) -> io.TextIOWrapper:
    """``sys.std*`` over descriptor ``fd`` as the interpreter opens it at start (pylifecycle's create_stdio),
    with the encoding and errors it chose for this process: buffered unless it was not, line-buffered on a
    terminal, stderr line-buffered always."""
    writing = fd != 0
    unbuffered = old.write_through  # -u or PYTHONUNBUFFERED: stdout and stderr are raw (stdin stays buffered)
    mode, buffering = ("wb", 0 if unbuffered else -1) if writing else ("rb", -1)
    buffered: Any = open(fd, mode, buffering=buffering, closefd=False)  # noqa: SIM115 (it becomes sys.std*)
    raw = getattr(buffered, "raw", buffered)
    raw.name = old.name
    line_buffering = not unbuffered and (raw.isatty() or fd == 2)
    stream = io.TextIOWrapper(buffered, old.encoding, old.errors, "\n", line_buffering, unbuffered)
    stream.mode = "w" if writing else "r"  # type: ignore[misc]
    return stream


def launch() -> Request:
    """Load the CLI, say so on the control socket (``sys.argv[2]``), then serve; return in a child only.

    Where a child cannot be watched through a pidfd (Linux before 5.3), say that it is unavailable and end.
    """
    control = socket.socket(fileno=int(sys.argv[2]))
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError as err:
        control.send(json.dumps({"unavailable": str(err)}).encode())
        sys.exit(0)
    for module in PRELOAD:
        importlib.import_module(module)
    cli: Any = sys.modules["afi.cli"]
    for module in cli.COMMAND_MODULES:
        importlib.import_module(module)
    control.send(json.dumps({"ready": True}).encode())
    return Launcher(control).serve()


if __name__ == "__main__":
    _request = launch()
    from afi.cli import main

    if _request.script is not None:
        sys.exit(main())  # type: ignore[func-returns-value]
    main()
