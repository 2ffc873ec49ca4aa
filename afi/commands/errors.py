"""Turning an AfiError into the CLI's one error line and exit code."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer

from ..errors import SSH_EXIT, AfiError
from .console import stderr

__all__ = ["afi_errors", "stderr"]


@contextmanager
def afi_errors() -> Iterator[None]:
    """Run a command body; an AfiError becomes ``afi: <path>: <code>: <message>`` and exit 2."""
    try:
        yield
    except AfiError as err:
        where = f"{err.path}: " if err.path else ""
        # one line however narrow the terminal, so logs and grep keep the whole message together
        stderr().print(f"afi: {where}{err.code}: {err.message}", markup=False, soft_wrap=True)
        raise typer.Exit(SSH_EXIT.get(err.code, 2)) from None
