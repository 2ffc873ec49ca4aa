"""``afi sync REMOTE``: bring a space of this store and of another in step, both ways by default.

REMOTE is another store: a SQLite file (a path or ``sqlite:///…``), a PostgreSQL URL, or an ``afi
serve`` URL (``--token``: a key with ``afi:admin`` on the space). Each side
applies what the other has not applied yet, in batches of one transaction each; a conflict (one name
written on both sides) is settled alike on both and printed. An AfiError becomes
``afi: <path>: <code>: <message>`` and exit 2.

``--watch`` keeps syncing, a round now and then one every ``--every`` (:mod:`.sync_watch`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from .errors import afi_errors, stderr
from .options import DbOption, RootOption, SpaceOption, resolve_db, resolve_store

__all__ = ["register"]


def _n(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


def _said(direction: str, traffic: Any, dry_run: bool) -> str:
    sent = (f"{_n(traffic.notes, 'version')}, {_n(traffic.forgotten, 'forget')} and "
            f"{_n(traffic.file_versions, 'file version')}")  # fmt: skip
    if traffic.ledger_entries:
        sent += f" and {traffic.ledger_entries} ledger {'entry' if traffic.ledger_entries == 1 else 'entries'}"
    if dry_run:
        return f"{direction}: would send {sent}"
    if not traffic.batches and not traffic.blocks and not traffic.snapshots and not traffic.folders:
        return f"{direction}: nothing new"
    notes = f"{traffic.inserted} new, {traffic.merged} merged, {traffic.deleted} forgotten"
    files = f"{_n(traffic.files_written, 'file')} written, {traffic.files_removed} removed"
    said = f"{direction}: {sent} in {_n(traffic.batches, 'batch')}: {notes}; {files}"
    if traffic.blocks or traffic.snapshots or traffic.folders:
        said += (f"; {_n(traffic.blocks, 'working block')}, {_n(traffic.snapshots, 'snapshot')} and "
                 f"{_n(traffic.folders, 'folder')} changed")  # fmt: skip
    if traffic.unkept:
        said += f"; {_n(len(traffic.unkept), 'file')} left as it was (its newest bytes were never kept)"
    return said


def sync(
    remote: Annotated[
        str, typer.Argument(help="The other store: a SQLite file or sqlite:/// URL, or a postgresql:// URL")
    ],
    pull: Annotated[bool, typer.Option("--pull", help="Only apply the remote's changes here")] = False,
    push: Annotated[bool, typer.Option("--push", help="Only apply this store's changes there")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would travel; change nothing")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
    token: Annotated[
        str | None,
        typer.Option("--token", envvar="AFI_TOKEN", help="An afi:admin key of the space, for an afi serve URL"),
    ] = None,
    watch: Annotated[
        bool, typer.Option("--watch", help="Keep syncing: now, then every --every, until Ctrl-C or SIGTERM")
    ] = False,
    every: Annotated[
        str | None,
        typer.Option("--every", metavar="INTERVAL", help="With --watch: 30s, 5m, 1h or seconds [default: 30s]"),
    ] = None,
    space: SpaceOption = "default",
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Bring SPACE of this store and of REMOTE in step: each applies the versions and forgets the
    other has not applied yet. One name written on both sides keeps both versions; both stores make
    the one written last current and print the conflict. With --watch, keep them in step: a line a
    round that moved something, failures printed and retried, exit 0 on Ctrl-C or SIGTERM."""
    from afi.app.sync import sync_stores

    if pull and push:
        raise typer.BadParameter("--pull and --push each name one direction; give neither for both")
    seconds = _interval(watch, every, dry_run)
    with afi_errors():
        store, workspace = resolve_store(db, root)
        there = remote if remote.startswith(("http://", "https://")) else resolve_db(remote, create=False)
        if seconds is not None:
            from .sync_watch import keep_in_step

            keep_in_step(store, workspace, there, seconds, space=space, pull=not push, push=not pull, token=token,
                         as_json=as_json)  # fmt: skip
            return
        report = sync_stores(store, workspace, there, space=space, pull=not push, push=not pull, dry_run=dry_run,
                             token=token)  # fmt: skip
    if as_json:
        typer.echo(json.dumps(report_json(report), indent=2))
    else:
        for direction, traffic, asked in (("pull", report.pulled, not push), ("push", report.pushed, not pull)):
            if asked:
                typer.echo(_said(direction, traffic, dry_run))
    say_conflicts(report)


def _interval(watch: bool, every: str | None, dry_run: bool) -> float | None:
    """The seconds between a watch's rounds (None without --watch); BadParameter (exit 2) for --every
    without --watch, an interval that is not one, or --dry-run with --watch."""
    from afi.app.sync_watch import DEFAULT_EVERY, parse_every
    from afi.errors import InvalidPath

    if not watch:
        if every is not None:
            raise typer.BadParameter("--every says how often --watch syncs: give --watch too")
        return None
    if dry_run:
        raise typer.BadParameter("--dry-run and --watch do not go together: a dry run says what one sync would "
                                 "send, a watch sends it")  # fmt: skip
    try:
        return parse_every(DEFAULT_EVERY if every is None else every)
    except InvalidPath as err:
        raise typer.BadParameter(err.message, param_hint="--every") from None


def say_conflicts(report: Any) -> None:
    """Each conflict a sync settled, one line on stderr."""
    for conflict in report.pulled.conflicts + report.pushed.conflicts:
        stderr().print(
            f"conflict: {conflict.kind} {conflict.name!r} was written on both sides: {conflict.kept} stays current, "
            f"{conflict.retired} is kept in /history/{conflict.retired}.md",
            highlight=False, markup=False, soft_wrap=True,
        )  # fmt: skip
    for kept in report.pulled.kept_aside + report.pushed.kept_aside:
        stderr().print(f"conflict: written on both sides; the other side's is kept as {kept}",
                       highlight=False, markup=False, soft_wrap=True)  # fmt: skip


def report_json(report: Any) -> dict[str, Any]:
    """A sync's report as ``--json`` prints it."""

    def side(traffic: Any) -> dict[str, Any]:
        return {"batches": traffic.batches, "versions": traffic.notes, "forgets": traffic.forgotten,
                "inserted": traffic.inserted, "merged": traffic.merged, "deleted": traffic.deleted,
                "conflicts": [vars(c) for c in traffic.conflicts], "file_versions": traffic.file_versions,
                "files_written": traffic.files_written, "files_removed": traffic.files_removed,
                "files_unkept": traffic.unkept, "ledger_entries": traffic.ledger_entries,
                "sessions": traffic.sessions, "working_blocks": traffic.blocks, "snapshots": traffic.snapshots,
                "folders": traffic.folders,
                "kept_aside": traffic.kept_aside}  # fmt: skip

    return {"dry_run": report.dry_run, "pull": side(report.pulled), "push": side(report.pushed)}


def register(app: typer.Typer) -> None:
    app.command("sync")(sync)
