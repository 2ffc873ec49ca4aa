"""The two lanes: ``make check`` runs the tests that start no process, ``make test`` runs them all.

A test is marked ``process`` when it starts one (the ``afi`` CLI, ``afi serve``/``ssh``/``mount``/
``mcp``, OpenSSH clients, sshfs, Node.js, a browser) and ``postgres`` when it needs the embedded
PostgreSQL (a server process too). Most marks are found, not written: :func:`classify` looks at the
fixtures a test asks for, its parameters and the helpers its module imports. A test can also say so
itself (``@pytest.mark.process``). :func:`forbid_processes` keeps the marks true: in a test without
the mark, starting a process fails the test and names what it tried to start.
"""

from __future__ import annotations

import os
import subprocess
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

# Fixtures that stand on a process: the embedded PostgreSQL, a browser.
POSTGRES_FIXTURES = frozenset({"postgres_url", "postgres_databases", "pg_store_url"})
PROCESS_FIXTURES = frozenset({"playwright", "browser", "afi_serve_process", "ssh_served"})
# Helpers that start processes: importing one puts the module's tests in the full suite.
PROCESS_MODULES = frozenset({"subprocess", "multiprocessing"})
PROCESS_HELPERS = frozenset(
    {
        "tests.support.cli",
        "tests.support.ssh",
        "tests.support.doors",
        "tests.support.fuse",
        "tests.support.hostile_ssh",
        "tests.support.postgres",
        "tests.support.bench_runs",
        "tests.support.warm",
    }
)
PROCESS_NAMES = frozenset({"start_afi_serve", "afi_mcp_command", "StdioServerParameters", "sync_playwright"})


def _starts_processes(module: types.ModuleType) -> bool:
    """Given a test module, return whether what it imports starts processes."""
    for name, value in vars(module).items():
        if isinstance(value, types.ModuleType):
            if value.__name__ in PROCESS_MODULES or value.__name__ in PROCESS_HELPERS:
                return True
            continue
        if name in PROCESS_NAMES or getattr(value, "__module__", None) in PROCESS_HELPERS:
            return True
    return False


def classify(items: list[pytest.Item]) -> None:
    """Mark each collected test ``postgres`` and/or ``process`` when it needs them (see the module)."""
    modules: dict[str, bool] = {}
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        postgres = bool(fixtures & POSTGRES_FIXTURES) or "postgresql" in params.values()
        if postgres:
            item.add_marker(pytest.mark.postgres)
        module = getattr(item, "module", None)
        if module is not None and module.__name__ not in modules:
            modules[module.__name__] = _starts_processes(module)
        imported = module is not None and modules[module.__name__]
        if postgres or imported or fixtures & PROCESS_FIXTURES:
            item.add_marker(pytest.mark.process)


class ProcessStarted(AssertionError):
    """A test without the ``process`` mark started a process."""


_guarded: list[str] = []  # the node id of the running test when it may start no process


def refuse_unmarked(what: str) -> None:
    """Raise :class:`ProcessStarted` when the running test may start no process; ``what`` names the process
    (the launcher of :mod:`tests.support.warm` forks its children elsewhere, so it asks here itself)."""
    if _guarded:
        raise ProcessStarted(
            f"{_guarded[0]} started a process ({what}) but is not marked `process`: mark it "
            "(@pytest.mark.process) so `make check` leaves it to the full suite, or test in-process"
        )


def install_guard() -> None:
    """Make process starts in this interpreter check :data:`_guarded` (once, at configure time)."""
    execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]
    fork = os.fork

    def guarded_execute_child(self: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> Any:
        refuse_unmarked(f"{args!r}"[:200])
        return execute_child(self, args, *rest, **kw)

    def guarded_fork() -> int:
        refuse_unmarked("os.fork()")
        return fork()

    subprocess.Popen._execute_child = guarded_execute_child  # type: ignore[attr-defined]
    os.fork = guarded_fork


@contextmanager
def forbid_processes(item: pytest.Item) -> Iterator[None]:
    """While the block runs (a test's setup or call), a test without the mark may start no process.

    Not its teardown: the last test of a worker tears down the session's fixtures, a PostgreSQL among them.
    """
    if item.get_closest_marker("process") is not None:
        yield
        return
    _guarded.append(item.nodeid)
    try:
        yield
    finally:
        _guarded.clear()
