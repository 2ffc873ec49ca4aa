"""``afi`` command lines started warm: forked from a Python that has already imported the CLI.

Starting ``afi`` is mostly starting Python and importing (``afi ls`` takes half a second of CPU, of which
listing is a few milliseconds), and the suite starts hundreds. :class:`AfiPopen` is
:class:`subprocess.Popen` for an ``afi`` command line: the console script (``[AFI, ...]``) or
``[sys.executable, "-c", AFI_MAIN, ...]``. It asks this worker's launcher (:mod:`tests.support.warm_launcher`,
started on first use, stopped by :func:`shutdown` at the session's end) to fork a child that runs
``afi.cli.main()`` with the command line, environment, working directory and standard streams given. The
child is a separate process running the real CLI, so its exit code, signals, ``kill -9`` in the middle of a
write, its standard streams and the store's locks are real; its pid is real (signals go through a pidfd).
Pipes, ``communicate``, ``wait(timeout)``, ``text`` and the rest are :class:`subprocess.Popen`'s own.

Anything a forked child would not inherit as an exec'd one does falls back to a real exec: another program,
``shell``, ``executable``, ``preexec_fn``, ``pass_fds``, ``close_fds=False``, user or group, ``umask``,
``process_group``, a terminal on a standard stream, an environment that differs from the launcher's in
what Python or the C library read at start (``PYTHON*``, ``LC_*``, ``LANG``, ``LD_*``…), or a worker
whose umask, limits, ignored or blocked signals, niceness or CPU affinity changed since the launcher
started. ``AFI_TEST_WARM=0`` turns it off (every command line is exec'd).
"""

from __future__ import annotations

import array
import contextlib
import errno
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AnyStr

from tests.support.lanes import refuse_unmarked

AFI = Path(sys.executable).with_name("afi")
AFI_MAIN = "from afi.cli import main; main()"
LAUNCHER = Path(__file__).with_name("warm_launcher.py")
BOOT = "import sys; exec(compile(open(sys.argv[1], encoding='utf-8').read(), sys.argv[1], 'exec'))"
# What Python or the C library read from the environment at start-up: a child of the launcher keeps the
# launcher's, so a request whose environment differs there is exec'd.
STARTUP_ENV_PREFIXES = ("PYTHON", "LC_", "LD_", "MALLOC_", "GLIBC_", "OPENBLAS", "OMP_", "MKL_")
STARTUP_ENV_NAMES = frozenset({"LANG", "LANGUAGE"})
LIMITS = tuple(getattr(resource, name) for name in dir(resource) if name.startswith("RLIMIT_"))
MAX_REQUEST = 1 << 16  # a command line and environment larger than this is exec'd (a message has a size limit)


@dataclass(frozen=True)
class Command:
    """What the interpreter of an ``afi`` command line would set up (see warm_launcher.Request)."""

    argv: list[str]
    orig_argv: list[str]
    executable: str
    path0: str
    script: str | None


def afi_command(args: Sequence[Any]) -> Command | None:
    """Given a Popen argument list, return the ``afi`` command line it runs (None: something else)."""
    words = [os.fsdecode(arg) for arg in args]
    if words[:1] == [str(AFI)]:
        interpreter = _shebang(AFI)
        script = os.path.abspath(words[0])
        return Command(words, [interpreter, *words], interpreter, os.path.dirname(os.path.realpath(script)), script)
    if words[:3] == [sys.executable, "-c", AFI_MAIN]:
        return Command(["-c", *words[3:]], words, words[0], "", None)
    return None


def _shebang(script: Path) -> str:
    with script.open("rb") as file:
        return file.readline()[2:].decode().strip()


def _inherited(env: Mapping[str, str]) -> tuple[Any, ...]:
    """What a child inherits from this thread and the environment it is given, that a forked child of the
    launcher has from when the launcher started instead."""
    status = dict(line.split(":\t", 1) for line in Path("/proc/thread-self/status").read_text().splitlines())
    startup_env = sorted(
        (name, value)
        for name, value in env.items()
        if name.startswith(STARTUP_ENV_PREFIXES) or name in STARTUP_ENV_NAMES
    )
    return (
        status["Umask"],
        status["SigIgn"],
        status["SigBlk"],
        tuple(resource.getrlimit(limit) for limit in LIMITS),
        os.getpriority(os.PRIO_PROCESS, 0),
        frozenset(os.sched_getaffinity(0)),
        tuple(startup_env),
    )


class _Launcher:
    """This worker's launcher process and the socket to it."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.inherited = _inherited(os.environ)
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (its stderr, read if it fails)
        cmd = [sys.executable, "-c", BOOT, str(LAUNCHER), str(theirs.fileno())]
        self.process = subprocess.Popen(
            cmd, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log
        )
        theirs.close()
        self.control = ours
        self.lock = threading.Lock()
        ours.settimeout(120)
        try:
            said = json.loads(ours.recv(1024) or b"{}")
        except (OSError, ValueError):
            said = {}
        ours.settimeout(None)
        self.available = "unavailable" not in said
        if not said:
            self.process.kill()
            self.process.wait()
            self.log.seek(0)
            raise RuntimeError(f"the warm afi launcher did not start: {self.log.read().decode(errors='replace')}")

    def accepts(self, env: Mapping[str, str]) -> bool:
        """Whether a child forked now would inherit what an exec'd one would (see the module)."""
        if self.process.poll() is not None:
            self.log.seek(0)
            said = self.log.read().decode(errors="replace")
            raise RuntimeError(f"the warm afi launcher ended ({self.process.returncode}): {said}")
        return _inherited(env) == self.inherited

    def start(
        self, command: Command, env: Mapping[str, str], cwd: str, stdio: list[int], new_session: bool
    ) -> tuple[socket.socket, int, int] | None:
        """Ask for a child; return the socket its exit status comes on, its pid and a pidfd of it (None: the
        request is too large, exec it)."""
        request = {**vars(command), "env": dict(env), "cwd": cwd, "new_session": new_session}
        message = json.dumps(request).encode()
        if len(message) > MAX_REQUEST:
            return None
        answers, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fds = array.array("i", [theirs.fileno(), *stdio])
        try:
            with self.lock:
                self.control.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        finally:
            theirs.close()
        fds = array.array("i")
        answers.settimeout(600)  # the launcher imports a server's modules before its first start
        data, ancdata, _, _ = answers.recvmsg(1024, socket.CMSG_SPACE(fds.itemsize))
        answers.settimeout(None)
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        if not data:
            answers.close()
            raise RuntimeError("the warm afi launcher went away")
        answer = json.loads(data)
        if "error" in answer:
            answers.close()
            raise subprocess.SubprocessError(f"afi could not start: {answer['error']}")
        return answers, int(answer["pid"]), fds[0]

    def close(self) -> None:
        """Say goodbye (the launcher kills the children still running) and wait for it to end."""
        self.control.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


_launcher: _Launcher | None = None
_launcher_lock = threading.Lock()


def _get_launcher() -> _Launcher | None:
    """This worker's launcher, started on first use; None where there is none (turned off, not Linux)."""
    global _launcher
    if os.environ.get("AFI_TEST_WARM", "1") == "0" or sys.platform != "linux" or not hasattr(os, "pidfd_open"):
        return None
    with _launcher_lock:
        if _launcher is None:
            _launcher = _Launcher()
        return _launcher if _launcher.available else None


def shutdown() -> None:
    """Stop this worker's launcher, if it started (the end of the session): its children still running die."""
    global _launcher
    with _launcher_lock:
        if _launcher is not None:
            _launcher.close()
            _launcher = None


class _Pidfd:
    """A pidfd, closed with its owner."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self, _close: Any = os.close) -> None:  # _close: os may be gone when the interpreter ends
        _close(self.fd)


class AfiPopen(subprocess.Popen[AnyStr]):
    """:class:`subprocess.Popen` that runs an ``afi`` command line as a warm child when it can (see the module)."""

    _answers: socket.socket | None = None
    _pidfd: _Pidfd | None = None
    _status: int | None = None
    warm = False

    def _execute_child(
        self,
        args: Any,
        executable: Any,
        preexec_fn: Any,
        close_fds: bool,
        pass_fds: Any,
        cwd: Any,
        env: Any,
        startupinfo: Any,
        creationflags: int,
        shell: bool,
        p2cread: int,
        p2cwrite: int,
        c2pread: int,
        c2pwrite: int,
        errread: int,
        errwrite: int,
        restore_signals: bool,
        gid: Any,
        gids: Any,
        uid: Any,
        umask: int,
        start_new_session: bool,
        process_group: int,
    ) -> None:
        plain = (
            executable is None
            and preexec_fn is None
            and close_fds
            and not pass_fds
            and not shell
            and restore_signals
            and (gid, gids, uid) == (None, None, None)
            and umask < 0
            and process_group == -1
        )
        command = afi_command(args) if plain and not isinstance(args, (str, bytes, os.PathLike)) else None
        workdir = os.path.abspath(os.fsdecode(cwd)) if cwd is not None else os.getcwd()
        environ = os.environ if env is None else {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()}
        stdio = [fd if fd != -1 else own for fd, own in zip((p2cread, c2pwrite, errwrite), (0, 1, 2), strict=True)]
        launcher = _get_launcher() if command is not None else None
        started = None
        if (
            command is not None
            and launcher is not None
            and os.path.isdir(workdir)
            and not any(_unusable(fd) for fd in stdio)
            and launcher.accepts(environ)
        ):
            refuse_unmarked(f"{list(args)!r}"[:200])
            started = launcher.start(command, environ, workdir, stdio, start_new_session)
        if started is None:
            super()._execute_child(  # type: ignore[misc]
                args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo, creationflags, shell,
                p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite, restore_signals, gid, gids, uid, umask,
                start_new_session, process_group,
            )  # fmt: skip
            return
        self._answers, self.pid, pidfd = started
        self._pidfd = _Pidfd(pidfd)
        self._child_created = True
        self.warm = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)  # type: ignore[attr-defined]

    def _warm_waitpid(self, pid: int, flags: int) -> tuple[int, int]:
        """waitpid for a warm child: its status, from the launcher that reaped it; (0, 0) when not yet."""
        if self._status is None:
            answers = self._answers
            assert answers is not None
            try:
                data = answers.recv(1024, socket.MSG_DONTWAIT if flags & os.WNOHANG else 0)
            except BlockingIOError:
                return 0, 0
            if not data:
                raise RuntimeError(f"the warm afi launcher went away before afi (pid {pid}) ended")
            self._status = int(json.loads(data)["status"])
            answers.close()
        return pid, self._status

    def _try_wait(self, wait_flags: int) -> tuple[int, int]:
        if not self.warm:
            return super()._try_wait(wait_flags)  # type: ignore[misc,no-any-return]
        return self._warm_waitpid(self.pid, wait_flags)

    def _internal_poll(self, _deadstate: int | None = None, **_kw: Any) -> int | None:
        if not self.warm:
            return super()._internal_poll(_deadstate)  # type: ignore[misc,no-any-return]
        return super()._internal_poll(_deadstate, _waitpid=self._warm_waitpid)  # type: ignore[misc,no-any-return]

    def send_signal(self, sig: int) -> None:
        if not self.warm:
            super().send_signal(sig)
            return
        self.poll()
        if self.returncode is not None or self._pidfd is None:
            return
        with contextlib.suppress(ProcessLookupError):  # it has ended; the launcher has its status
            signal.pidfd_send_signal(self._pidfd.fd, sig)


def _unusable(fd: int) -> bool:
    """Whether a standard stream the child would be given is closed or a terminal (exec'd then)."""
    try:
        return os.isatty(fd)
    except OSError as err:
        return err.errno == errno.EBADF


def run(
    args: Sequence[Any],
    *,
    input: Any = None,
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """:func:`subprocess.run`, through :class:`AfiPopen`."""
    if input is not None:
        if kwargs.get("stdin") is not None:
            raise ValueError("stdin and input arguments may not both be used.")
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        if kwargs.get("stdout") is not None or kwargs.get("stderr") is not None:
            raise ValueError("stdout and stderr arguments may not be used with capture_output.")
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    process: AfiPopen[Any]
    with AfiPopen(args, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()  # communicate has put the output so far in the exception
            raise
        except BaseException:
            process.kill()  # __exit__ waits
            raise
        retcode = process.poll()
        assert retcode is not None
        if check and retcode:
            raise subprocess.CalledProcessError(retcode, process.args, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(process.args, retcode, stdout, stderr)
