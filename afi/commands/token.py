"""``afi token create|list|revoke``: API keys bound to a space, holding scopes; ``afi token clients``: the
OAuth clients the owner approved (``afi token revoke grant_…`` revokes one)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from ..errors import InvalidPath
from .console import stdout
from .errors import afi_errors, stderr
from .options import DbOption, resolve_db

__all__ = ["register"]

token_app = typer.Typer(help="Create, list and revoke API keys (tokens are shown once).", no_args_is_help=True)


@token_app.command("create")
def create(
    scope: Annotated[
        list[str] | None, typer.Option("--scope", help="afi:read, afi:write or afi:admin (repeatable)")
    ] = None,
    space: Annotated[str, typer.Option("--space", help="The one space the key is bound to")] = "default",
    name: Annotated[str | None, typer.Option("--name", help="A label to recognise the key by")] = None,
    db: DbOption = None,
) -> None:
    """Create a key and print its token once (only its SHA-256 is stored)."""
    from ..auth.keys import KeyStore

    with afi_errors():
        record, token = KeyStore(resolve_db(db)).create(space=space, scopes=tuple(scope or ["afi:read"]), name=name)
    stderr().print(
        f"created {record.id} (space {record.space}, scopes {' '.join(record.scopes)}); "
        "the token below is shown only now:",
        markup=False,
    )
    stdout().print(token, markup=False)


@token_app.command("list")
def list_keys(db: DbOption = None) -> None:
    """List keys (never their tokens): a table on a terminal, tab-separated rows when piped."""
    from ..auth.keys import KeyStore

    rows = [
        (r.id, r.name or "", r.space, " ".join(r.scopes), r.created_at, r.revoked_at or "")
        for r in KeyStore(resolve_db(db)).list()
    ]
    _rows(("id", "name", "space", "scopes", "created", "revoked"), rows)


def _rows(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    """Print a rich table on a terminal; piped, one tab-separated line per row (no header), whole."""
    if not stdout().is_terminal:
        for row in rows:
            sys.stdout.write("\t".join(row) + "\n")
        sys.stdout.flush()
        return
    from rich.table import Column, Table

    table = Table(Column(header[0], no_wrap=True), *header[1:])
    for row in rows:
        table.add_row(*row)
    stdout().print(table)


@token_app.command("clients")
def clients(db: DbOption = None) -> None:
    """List the OAuth clients the owner approved (one row per grant, never a token): a table on a
    terminal, tab-separated rows when piped. Revoke one with afi token revoke GRANT_ID."""
    from ..auth.oauth.store import OAuthStore
    from ..storage.database import open_database

    rows = [
        (g.id, g.client_name, g.client_id, g.space, " ".join(g.scopes), " ".join(g.redirect_uris), g.resource,
         g.approved_by, g.created_at, g.revoked_at or "")
        for g in OAuthStore(open_database(resolve_db(db))).grants()
    ]  # fmt: skip
    header = ("grant", "client", "client id", "space", "scopes", "redirect", "resource", "approved by", "created")
    _rows((*header, "revoked"), rows)


@token_app.command("revoke")
def revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (afi token list) or OAuth grant id (afi token clients)")],
    db: DbOption = None,
) -> None:
    """Revoke a key, or an OAuth client's grant (all its access and refresh tokens); it stops working at once."""
    from ..auth.keys import KeyStore

    if key_id.startswith("grant_"):
        _revoke_grant(key_id, resolve_db(db))
        return
    if not KeyStore(resolve_db(db)).revoke(key_id):
        stderr().print(f"afi: {key_id}: not_found: no active key has this id", markup=False)
        raise typer.Exit(2)
    stderr().print(f"revoked {key_id}", markup=False)


def _revoke_grant(grant_id: str, db: Path | str) -> None:
    from ..auth.audit import AuditLog
    from ..auth.oauth.store import OAuthStore
    from ..provider import Caller
    from ..storage.database import open_database

    database = open_database(db)
    grant = OAuthStore(database).grant(grant_id)
    if grant is None or not OAuthStore(database).revoke_grant(grant_id):
        stderr().print(f"afi: {grant_id}: not_found: no active OAuth grant has this id", markup=False)
        raise typer.Exit(2)
    AuditLog(database).record(
        Caller("local", grant.space), "oauth.revoke", f"/oauth/{grant.client_id}/{grant_id}", "ok"
    )
    stderr().print(f"revoked {grant_id} ({grant.client_name or grant.client_id}, space {grant.space})", markup=False)


ssh_app = typer.Typer(help="SSH public keys as principals: add, list, revoke.", no_args_is_help=True)
token_app.add_typer(ssh_app, name="ssh")


@ssh_app.command("add")
def ssh_add(
    public_key: Annotated[str, typer.Argument(help="A .pub file, or '-' to read the key line from stdin")],
    scope: Annotated[
        list[str] | None, typer.Option("--scope", help="afi:read, afi:write or afi:admin (repeatable)")
    ] = None,
    space: Annotated[str, typer.Option("--space", help="The one space the key is bound to")] = "default",
    name: Annotated[str | None, typer.Option("--name", help="A label [default: the key's comment]")] = None,
    api_key: Annotated[
        str | None, typer.Option("--api-key", help="Act as this API key (its principal, space and scopes)")
    ] = None,
    db: DbOption = None,
) -> None:
    """Let an SSH public key log in, as its own principal or as an existing API key."""
    from ..auth.ssh_keys import SshKeyStore

    with afi_errors():
        line = sys.stdin.read() if public_key == "-" else _key_line(Path(public_key).expanduser())
        record = SshKeyStore(resolve_db(db)).add(
            line, space=space, scopes=tuple(scope or ["afi:read"]), name=name, api_key=api_key
        )
    stderr().print(f"added {record.id} (space {record.space}, scopes {' '.join(record.scopes)})", markup=False)
    stdout().print(f"{record.id} {record.fingerprint}", markup=False)


def _key_line(path: Path) -> str:
    """Given the path of a public key file, return its text.

    Raises:
        InvalidPath: it is missing, unreadable, or not text.
    """
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidPath("no such public key file", path=str(path)) from None
    except IsADirectoryError:
        raise InvalidPath("a folder, not a public key file (give the .pub file)", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else "not a text file"
        raise InvalidPath(f"cannot read this public key file: {reason}", path=str(path)) from None


@ssh_app.command("list")
def ssh_list(db: DbOption = None) -> None:
    """List SSH keys (id, fingerprint, the principal each acts as): a table on a terminal, tab-separated
    rows when piped."""
    from ..auth.ssh_keys import SshKeyStore

    rows = [
        (r.id, r.fingerprint, r.principal, r.space, " ".join(r.scopes), r.name or "", r.revoked_at or "")
        for r in SshKeyStore(resolve_db(db)).list()
    ]
    _rows(("id", "fingerprint", "principal", "space", "scopes", "name", "revoked"), rows)


@ssh_app.command("revoke")
def ssh_revoke(
    key_id: Annotated[str, typer.Argument(help="The SSH key id (see afi token ssh list)")], db: DbOption = None
) -> None:
    """Revoke an SSH key; it cannot log in any more."""
    from ..auth.ssh_keys import SshKeyStore

    if not SshKeyStore(resolve_db(db)).revoke(key_id):
        stderr().print(f"afi: {key_id}: not_found: no active SSH key has this id", markup=False)
        raise typer.Exit(2)
    stderr().print(f"revoked {key_id}", markup=False)


def register(app: typer.Typer) -> None:
    """Add ``afi token …`` to ``app``."""
    app.add_typer(token_app, name="token")
