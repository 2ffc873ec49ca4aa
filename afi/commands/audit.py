"""``afi audit list|prune``: the record of every write verb, and dropping old rows of it."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from .console import stderr, stdout
from .options import DbOption, resolve_db

if TYPE_CHECKING:
    from ..auth.audit import AuditLog

__all__ = ["register"]

audit_app = typer.Typer(help="The audit log of write verbs: list recent rows, prune old ones.", no_args_is_help=True)


def _log(db: DbOption) -> AuditLog:
    """The audit log of the store, opened without the rest of the provider."""
    from ..auth.audit import AuditLog
    from ..storage.database import open_database

    return AuditLog(open_database(resolve_db(db)))


@audit_app.command("list")
def list_rows(
    limit: Annotated[int, typer.Option("--limit", min=1, max=100_000, help="How many rows, newest first")] = 50,
    db: DbOption = None,
) -> None:
    """Show the most recent write verbs, one per line: when, who, space, verb, result, path (grep-friendly)."""
    for row in _log(db).recent(limit=limit):
        fields = (row["at"], row["principal"], row["space"], row["verb"], row["result"], row["path"])
        stdout().print("  ".join(str(field) for field in fields), markup=False, soft_wrap=True)


@audit_app.command("prune")
def prune(
    older_than: Annotated[
        float, typer.Option("--older-than", min=0, help="Drop rows older than this many days (required)")
    ],
    db: DbOption = None,
) -> None:
    """Delete audit rows older than --older-than days; print how many went."""
    removed = _log(db).prune(timedelta(days=older_than))
    stderr().print(f"pruned {removed} audit rows older than {older_than:g} days", markup=False)


def register(app: typer.Typer) -> None:
    """Add ``afi audit …`` to ``app``."""
    app.add_typer(audit_app, name="audit")
