"""Memory commands: ``afi remember``, ``afi recall``, ``afi forget``.

Each opens the store as its local owner. ``remember`` and ``forget`` go through the provider, so they
are locked and audited like the same write through any door; ``recall`` reads the space's fabric. An
AfiError (bad kind, importance out of range, a path leaving the jail) becomes
``afi: <path>: <code>: <message>`` on stderr and exit code 2.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InvalidPath
from .console import stdout
from .errors import afi_errors
from .options import DbOption, RootOption, SpaceOption, resolve_db, resolve_store

if TYPE_CHECKING:
    from afi.app.local import MemoryNote, RecallResult

__all__ = ["register"]

SNIPPET_CHARS = 60

KindArg = Annotated[str, typer.Argument(help="Note kind: fact, procedure, file or working")]
ContentArg = Annotated[str, typer.Argument(help="The note's text")]
QueryArg = Annotated[str, typer.Argument(help="What to look for")]


def _owner(db: Any, root: Any, space: str) -> tuple[Any, Any]:
    """The provider over the store, and the local owner of ``space`` (who runs the CLI on this machine)."""
    from afi.app.local import local_owner, open_provider

    return open_provider(*resolve_store(db, root)), local_owner(space)


def remember(
    kind: KindArg,
    content: ContentArg,
    name: Annotated[
        str | None,
        typer.Option("--name", help="Note name: its file name under /facts or /procedures (default: its id)"),
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="A tag (repeatable)")] = None,
    keyword: Annotated[list[str] | None, typer.Option("--keyword", help="A keyword (repeatable)")] = None,
    importance: Annotated[float | None, typer.Option("--importance", help="Recall weight in [0, 1]")] = None,
    valid_from: Annotated[str | None, typer.Option("--valid-from", help="ISO time the note starts to hold")] = None,
    valid_to: Annotated[str | None, typer.Option("--valid-to", help="ISO time the note stops holding")] = None,
    path: Annotated[str | None, typer.Option("--path", help="Workspace path of a file note")] = None,
    block: Annotated[str | None, typer.Option("--block", help="Working block label")] = None,
    space: SpaceOption = "default",
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Remember a note; consolidation folds it into a same or superseded note. Prints id, kind, name, supersedes."""
    with afi_errors():
        fields: dict[str, Any] = {
            "name": name,
            "tags": tag or None,
            "keywords": keyword or None,
            "importance": importance,
            "valid_from": valid_from,
            "valid_to": valid_to,
            "path": path,
            "block": block,
        }
        provider, owner = _owner(db, root, space)
        note = provider.remember(
            owner, kind=kind, content=content, **{k: v for k, v in fields.items() if v is not None}
        )
        _print_note(note)


def recall(
    query: QueryArg,
    kind: Annotated[
        list[str] | None, typer.Option("--kind", help="Kind to return, repeatable (default: fact and file)")
    ] = None,
    top_k: Annotated[int, typer.Option("--top-k", help="Maximum hits")] = 10,
    threshold: Annotated[
        float,
        typer.Option(
            "--threshold",
            min=0.0,
            max=1.0,
            help="Leave out hits scoring below this (scores are relative: the best match scores about 1)",
        ),
    ] = 0.5,
    budget: Annotated[
        int | None, typer.Option("--budget", help="Ceiling on the summed token count of the hits")
    ] = None,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="ISO time to evaluate validity at (default: now)")
    ] = None,
    space: SpaceOption = "default",
    db: DbOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the hits and explain rows as JSON")] = False,
) -> None:
    """Recall notes by meaning; shows each hit with why it matched (score, similarity, recency, importance,
    and what the time the query names and the notes adjacent to it added)."""
    with afi_errors():
        from afi.app.local import recall_explained

        options: dict[str, Any] = {"kinds": kind or None, "top_k": top_k, "budget": budget, "as_of": as_of}
        found = recall_explained(resolve_db(db), space, query, **{k: v for k, v in options.items() if v is not None})
        kept = [i for i, why in enumerate(found.explain) if why.score >= threshold]
        result = found.model_copy(
            update={"hits": [found.hits[i] for i in kept], "explain": [found.explain[i] for i in kept]}
        )
        if as_json:
            typer.echo(json.dumps(result.model_dump(mode="json", exclude_none=True), indent=2))
        else:
            _print_recall(result)


def forget(
    id: Annotated[str | None, typer.Option("--id", help="Id of the note to forget")] = None,
    block: Annotated[str | None, typer.Option("--block", help="Working block to clear")] = None,
    hold: Annotated[bool, typer.Option("--hold", help="Keep the note under legal hold instead of deleting it")] = False,
    space: SpaceOption = "default",
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Forget one note (--id) or clear one working block (--block); --hold keeps a note under legal hold."""
    with afi_errors():
        if (id is None) == (block is None):
            raise InvalidPath("forget needs exactly one of --id or --block")
        provider, owner = _owner(db, root, space)
        result = provider.forget(owner, id=id, block=block, hold=hold)
        for key, value in result.model_dump(exclude_none=True).items():
            typer.echo(f"{key}: {json.dumps(value)}")


def _print_note(note: MemoryNote) -> None:
    for key in ("id", "kind", "name", "block", "path", "supersedes", "valid_from", "valid_to"):
        value = getattr(note, key)
        if value is not None or key in ("id", "kind", "supersedes"):
            typer.echo(f"{key}: {value if value is not None else '-'}")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _print_recall(result: RecallResult) -> None:
    from rich.table import Column, Table

    if result.vectors_pending:
        typer.echo(f"{result.vectors_pending} notes written moments ago are still being embedded: "
                   "this recall found them by their words only", err=True)  # fmt: skip
    if not result.hits:
        typer.echo("no notes matched")
        return
    table = Table(
        Column("id", no_wrap=True), "kind", "score", "similarity", "recency", "importance", "dated", "adjacent", "link",
        "valid", "content",
    )  # fmt: skip
    for hit, why in zip(result.hits, result.explain, strict=True):
        text = hit.content.replace("\n", " ")
        snippet = text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"
        table.add_row(
            hit.id,
            hit.kind,
            _num(why.score),
            _num(why.similarity),
            _num(why.recency),
            _num(why.importance if why.importance is not None else hit.importance),
            _num(why.dated),
            _num(why.adjacent),
            "yes" if why.link else "no",
            "yes" if why.valid else "no",
            snippet,
        )
    stdout(wide=True).print(table)


def register(app: typer.Typer) -> None:
    """Add ``remember``, ``recall`` and ``forget`` to ``app``."""
    app.command("remember")(remember)
    app.command("recall")(recall)
    app.command("forget")(forget)
