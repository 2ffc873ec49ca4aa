"""``afi search QUERY [--regex|--semantic|--conversation SESSION] [--path P] [--limit N] [--json]``.

Opens the store as the local owner, runs the provider's one ``search`` verb and prints one match per
line (``path:line: text``, with the score in semantic and conversation modes), or the page as JSON.
Pages are followed until ``--limit`` matches or the end, so a page that its work budget cut short
(a big file) never ends the answer early.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from ..errors import InvalidPath
from .errors import afi_errors
from .options import DbOption, RootOption, SpaceOption, resolve_store

__all__ = ["register"]


def search(
    query: Annotated[str, typer.Argument(help="Text to find (case-sensitive), a regex, or a question")],
    regex: Annotated[bool, typer.Option("--regex", help="QUERY is a regular expression (ECMAScript-like)")] = False,
    semantic: Annotated[bool, typer.Option("--semantic", help="Search notes by meaning")] = False,
    conversation: Annotated[
        str | None, typer.Option("--conversation", help="Search this session's transcript by query terms")
    ] = None,
    path: Annotated[str, typer.Option("--path", help="Only under this path")] = "/",
    limit: Annotated[int, typer.Option("--limit", help="Maximum matches (hits, in conversation mode)")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="Print the page of matches as JSON")] = False,
    space: SpaceOption = "default",
    db: DbOption = None,
    root: RootOption = None,
) -> None:
    """Search the space: exact text (default), --regex, --semantic, or --conversation SESSION."""
    with afi_errors():
        from afi.app.local import local_owner, open_provider
        from afi.model import ConversationQuery, RegexQuery, SearchRequest, SemanticQuery, dump

        if sum((regex, semantic, conversation is not None)) > 1:
            raise InvalidPath("choose one of --regex, --semantic, --conversation")
        q: Any = query
        if regex:
            q = RegexQuery(regex=query)
        elif semantic:
            q = SemanticQuery(semantic=query)
        elif conversation is not None:
            q = ConversationQuery(conversation=query, session=conversation)
        provider = open_provider(*resolve_store(db, root))
        page = provider.search(local_owner(space), SearchRequest(query=q, path=path, limit=limit))
        while page.next_cursor and len(page.matches) < limit:
            more = provider.search(
                local_owner(space),
                SearchRequest(query=q, path=path, limit=limit - len(page.matches), cursor=page.next_cursor),
            )
            page = page.model_copy(update={"matches": page.matches + more.matches, "next_cursor": more.next_cursor,
                                           "x_truncated": more.x_truncated})  # fmt: skip
        if as_json:
            typer.echo(json.dumps(dump(page), indent=2))
            return
        if page.x_vectors_pending:
            typer.echo(f"{page.x_vectors_pending} notes written moments ago are still being embedded: "
                       "this search found them by their words only", err=True)  # fmt: skip
        for match in page.matches:
            # grep's own layout (path:line:text), with the score in front of the text when there is one
            score = f"[{match.score:.3f}] " if match.score is not None else ""
            typer.echo(f"{match.path}:{match.line}:{score}{match.text}")
        if not page.matches:
            raise typer.Exit(1)  # as grep: no match is exit status 1, with nothing printed


def register(app: typer.Typer) -> None:
    """Add ``search`` to ``app``."""
    app.command("search")(search)
