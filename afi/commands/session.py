"""Ledger commands: ``afi session append|observe|reflect|open-scope|close-scope|bind|show|list``.

A write opens the store as its local owner and runs one ledger operation through the provider (the
same ``ledger_write`` the HTTP routes call: locked and audited); ``show`` and ``list`` read the
space's ledger. An AfiError becomes ``afi: <path>: <code>: <message>`` and exit 2.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from ..errors import InvalidPath
from .errors import afi_errors
from .options import DbOption, RootOption, SpaceOption, resolve_db, resolve_store

__all__ = ["register"]

session_app = typer.Typer(
    name="session", help="The observational ledger: a session's messages, observations, reflections, scopes.",
    no_args_is_help=True,
)  # fmt: skip

SessionArg = Annotated[str, typer.Argument(help="Session id (get or create)")]
TextArg = Annotated[str, typer.Argument(help="The text")]
Stamp = Annotated[str | None, typer.Option("--timestamp", help="ISO time of the entry [default: now]")]


def _run(db: Any, root: Any, space: str, op: str, session: str, body: dict[str, Any]) -> dict[str, Any]:
    from afi.app.local import local_owner, open_provider

    provider = open_provider(*resolve_store(db, root))
    result: dict[str, Any] = provider.ledger_write(local_owner(space), op, session, body)
    return result


def _print(result: dict[str, Any]) -> None:
    typer.echo(json.dumps(result, indent=2))


def _given(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


@session_app.command("append")
def append(
    session: SessionArg,
    text: TextArg,
    entry_id: Annotated[str, typer.Option("--id", help="Entry id; appending the same id again is a no-op")],
    role: Annotated[str, typer.Option("--role", help="user, assistant, tool or system")] = "user",
    timestamp: Stamp = None,
    space: SpaceOption = "default",
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Append one message to the session's branch; prints the stored entry."""
    with afi_errors():
        message = _given(role=role, text=text, entry_id=entry_id, timestamp=timestamp)
        _print(_run(db, root, space, "append", session, {"messages": [message]}))


@session_app.command("observe")
def observe(
    session: SessionArg,
    text: TextArg,
    source: Annotated[list[str] | None, typer.Option("--source", help="Cited message id (repeatable)")] = None,
    entry_id: Annotated[str | None, typer.Option("--entry-id", help="Entry id, so a retry is a no-op")] = None,
    timestamp: Stamp = None,
    space: SpaceOption = "default",
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Record an observation citing messages; prints it with its 12-hex id."""
    with afi_errors():
        body = _given(text=text, source_entry_ids=source or [], entry_id=entry_id, timestamp=timestamp)
        _print(_run(db, root, space, "observe", session, body))


@session_app.command("reflect")
def reflect(
    session: SessionArg,
    text: TextArg,
    observation: Annotated[list[str], typer.Option("--observation", help="Folded observation id (repeatable)")],
    scope: Annotated[str | None, typer.Option("--scope", help="Open work scope to bind the reflection to")] = None,
    entry_id: Annotated[str | None, typer.Option("--entry-id", help="Entry id, so a retry is a no-op")] = None,
    timestamp: Stamp = None,
    space: SpaceOption = "default",
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Fold observations into a reflection, optionally bound to an open work scope; prints it."""
    with afi_errors():
        body = _given(text=text, observation_ids=observation, scope_id=scope, entry_id=entry_id, timestamp=timestamp)
        _print(_run(db, root, space, "reflect", session, body))


@session_app.command("open-scope")
def open_scope(session: SessionArg, name: Annotated[str, typer.Argument(help="Scope name")],
               space: SpaceOption = "default", db: DbOption = None, root: RootOption = None) -> None:  # fmt: skip
    """Open a work scope; prints it with its 12-hex id."""
    with afi_errors():
        _print(_run(db, root, space, "scope.open", session, {"name": name}))


@session_app.command("close-scope")
def close_scope(session: SessionArg, scope_id: Annotated[str, typer.Argument(help="Scope id")],
                space: SpaceOption = "default", db: DbOption = None, root: RootOption = None) -> None:  # fmt: skip
    """Close a work scope: its bound reflections can now be promoted ('afi session promote')."""
    with afi_errors():
        _print(_run(db, root, space, "scope.close", session, {"scope_id": scope_id}))


@session_app.command("promote")
def promote(
    reflection_id: Annotated[str, typer.Argument(help="Reflection id (bound to a closed work scope)")],
    kind: Annotated[str, typer.Option("--kind", help="fact or procedure")] = "fact",
    name: Annotated[str | None, typer.Option("--name", help="Note name (default: its id)")] = None,
    space: SpaceOption = "default",
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Promote a reflection to a fact or procedure note: its text, with promoted_from naming the reflection
    and the scope it was closed in. Prints the note."""
    from afi.app.local import local_owner, open_provider

    with afi_errors():
        if kind not in ("fact", "procedure"):
            raise InvalidPath(f"a reflection is promoted to a fact or a procedure, not {kind!r}")
        provider = open_provider(*resolve_store(db, root))
        fields = _given(name=name)
        note = provider.remember(local_owner(space), kind=kind, reflection_id=reflection_id, **fields)
        _print(note.model_dump(mode="json", exclude_none=True, exclude={"scope"}))


@session_app.command("bind")
def bind(session: SessionArg, reflection_id: Annotated[str, typer.Argument(help="Reflection id")],
         scope_id: Annotated[str, typer.Argument(help="Open scope id")],
         space: SpaceOption = "default", db: DbOption = None, root: RootOption = None) -> None:  # fmt: skip
    """Bind an existing reflection to an open work scope (an om.scope.bound entry)."""
    with afi_errors():
        _print(_run(db, root, space, "bind", session, {"reflection_id": reflection_id, "scope_id": scope_id}))


@session_app.command("show")
def show(session: SessionArg, space: SpaceOption = "default", db: DbOption = None) -> None:
    """Print the session's transcript (the text of /sessions/<session>.md)."""
    with afi_errors():
        from afi.app.local import session_transcript

        typer.echo(session_transcript(resolve_db(db), space, session), nl=False)


@session_app.command("list")
def list_(space: SpaceOption = "default", db: DbOption = None) -> None:
    """Print the space's session ids, one per line."""
    with afi_errors():
        from afi.app.local import session_ids

        for sid in session_ids(resolve_db(db), space):
            typer.echo(sid)


def register(app: typer.Typer) -> None:
    """Add the ``session`` command group to ``app``."""
    app.add_typer(session_app, name="session")
