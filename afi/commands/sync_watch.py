"""``afi sync REMOTE --watch``: what the watch prints, round after round (the loop: :mod:`afi.app.sync_watch`).

stdout has a line for each round that moved something (its time, then what each direction moved),
and for the first round and the first after a failure when nothing moved (``in step: nothing new``);
with ``--json``, one object per round, quiet ones included. stderr has the start, each failure (the
watch goes on), each conflict, and the stop (exit 0 on SIGINT or SIGTERM). A failure no retry mends
raises its AfiError to the command, which ends with exit 2.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer

from .errors import stderr
from .sync import _n as plural
from .sync import report_json, say_conflicts

if TYPE_CHECKING:
    from afi.app.sync_watch import Round

__all__ = ["keep_in_step"]


def keep_in_step(store: Any, workspace: Any, there: Any, seconds: float, *, space: str, pull: bool, push: bool,
                 token: str | None, as_json: bool) -> None:  # fmt: skip
    """Sync this store's space and ``there``'s every ``seconds`` until SIGINT or SIGTERM (then return)."""
    from afi.app.sync import SyncSession
    from afi.app.sync_watch import Stopped, span, stop_on_signals, watch

    every = span(seconds)
    rounds, inside = 0, False

    def run() -> Any:
        nonlocal rounds, inside
        rounds, inside = rounds + 1, True
        return session.sync(pull=pull, push=push)

    def said(round_: Round) -> None:
        nonlocal inside
        inside = False
        _say(round_, pull=pull, push=push, as_json=as_json, every=every)

    try:
        with stop_on_signals(), SyncSession(store, workspace, there, space=space, token=token) as session:
            _note(f"afi: watching {session.where} (space {space}): a sync now, then every {every}; "
                  "Ctrl-C or SIGTERM stops")  # fmt: skip
            watch(run, seconds, said, reset=session.reset)
    except Stopped as stop:
        if inside:  # its batch in flight rolled back (each is one transaction): the next sync goes on from there
            _note(f"afi: stopped by {stop} in round {rounds}; the next sync goes on where it stopped")
        else:
            _note(f"afi: stopped by {stop} after {plural(rounds, 'round')}")


def _note(text: str) -> None:
    stderr().print(text, highlight=False, markup=False, soft_wrap=True)


def _say(round_: Round, *, pull: bool, push: bool, as_json: bool, every: str) -> None:
    """One round, as the module says."""
    if round_.error is not None:
        err = round_.error
        where = f"{err.path}: " if err.path else ""
        _note(f"afi: {where}{err.code}: {err.message} (round {round_.number} at {round_.at}; next in {every})")
        if as_json:
            typer.echo(json.dumps({"round": round_.number, "at": round_.at, "error": err.to_dict()}))
        return
    report = round_.report
    if as_json:
        typer.echo(json.dumps({"round": round_.number, "at": round_.at, **report_json(report)}))
    else:
        sides = (("pull", report.pulled, pull), ("push", report.pushed, push))
        moved = [_moved(direction, traffic) for direction, traffic, asked in sides if asked and _moves(traffic)]
        if moved:
            typer.echo(f"{round_.at} {'; '.join(moved)}")
        elif round_.number == 1 or round_.after_failure:
            typer.echo(f"{round_.at} in step: nothing new")
    say_conflicts(report)


def _moves(traffic: Any) -> bool:
    return bool(traffic.batches or traffic.blocks or traffic.snapshots or traffic.folders)


def _moved(direction: str, traffic: Any) -> str:
    """What one direction of a round moved: its counts that are not zero."""
    said = []
    if traffic.notes:
        said.append(f"{plural(traffic.notes, 'version')} ({traffic.inserted} new, {traffic.merged} merged)")
    if traffic.forgotten:
        said.append(f"{plural(traffic.forgotten, 'forget')} ({traffic.deleted} applied)")
    if traffic.file_versions:
        said.append(f"{plural(traffic.file_versions, 'file version')} ({plural(traffic.files_written, 'file')} "
                    f"written, {traffic.files_removed} removed)")  # fmt: skip
    if traffic.ledger_entries:
        said.append(f"{traffic.ledger_entries} ledger {'entry' if traffic.ledger_entries == 1 else 'entries'}")
    for count, what in ((traffic.blocks, "working block"), (traffic.snapshots, "snapshot"),
                        (traffic.folders, "folder")):  # fmt: skip
        if count:
            said.append(f"{plural(count, what)} changed")
    if traffic.unkept:
        said.append(f"{plural(len(traffic.unkept), 'file')} left as it was")
    return f"{direction}: {', '.join(said)}"
