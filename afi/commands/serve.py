"""``afi serve``: the HTTP/JSON binding (and MCP at /mcp) on uvicorn, over the embedded store.

This module parses and checks the options; :mod:`afi.app.serve` assembles and runs the server (one
process, or ``--workers N`` processes sharing one socket, announced once: ``afi: listening on
http://…``), and :mod:`afi.app.ssh` runs SSH beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn
from urllib.parse import urlsplit

import typer

from .errors import afi_errors, stderr
from .options import DbOption, RootOption, resolve_db, resolve_root
from .ssh import refusals

if TYPE_CHECKING:
    from ..auth.oauth.client_policy import ClientMetadataPolicy
    from ..auth.oauth.issuer import IssuerConfig

__all__ = ["is_loopback", "register"]


def is_loopback(host: str) -> bool:
    """Given a host (a name, an address, ``[::1]``, with or without a port), return whether it is this machine."""
    from ..auth.door import is_loopback_host

    return is_loopback_host(host)


WORKERS_HELP = (
    "Worker processes, each with its own provider on the same store. With more than one, /mcp is "
    "stateless (a session would live in one worker's memory), --rate counts per worker, and --ssh is refused"
)
ISSUER_HELP = (
    "Accept JWT access tokens of this identity provider (keys from its JWKS); the protected-resource "
    "metadata names it instead of the built-in authorization server. API keys keep working"
)
CLIENT_METADATA_HELP = (
    "Accept OAuth clients whose client_id is the https URL of their metadata document (CIMD), fetched by "
    "this server from public addresses only"
)
ALLOW_HOST_HELP = (
    "Fetch client metadata documents from this host even though it resolves to a loopback, private or "
    "otherwise non-public address (repeatable; for internal deployments)"
)
CA_HELP = (
    "A PEM file of CA certificates trusted, beside the usual public CAs, when fetching client metadata "
    "documents (an internal CA, a self-signed test certificate). SSL_CERT_FILE is not read for these fetches"
)
EMBEDDER_HELP = (
    "How recall reads meaning: minilm (all-MiniLM-L6-v2, a sentence embedder on ONNX) or hash (words only, no "
    "model) [default: the one the store's vectors came from; minilm for a new store]. AFI_EMBEDDER sets it too"
)
MAX_CONNECTIONS_HELP = "Open connections per process; more are answered 503 (default: the descriptor limit - 256)"


def serve(
    db: DbOption = None,
    root: RootOption = None,
    host: Annotated[str, typer.Option(help="Address to bind; non-loopback needs an API key first")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 picks a free one)")] = 8765,
    space: Annotated[
        str | None, typer.Option("--space", envvar="AFI_SPACE", help="Serve only this space (the keyless owner's too)")
    ] = None,
    rate: Annotated[float, typer.Option(help="Requests per second per principal (0: no limit)")] = 0.0,
    burst: Annotated[int, typer.Option(help="Requests a principal may burst")] = 100,
    workers: Annotated[int, typer.Option(min=1, help=WORKERS_HELP)] = 1,
    header_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds a client has to send a request's headers (then 408)")
    ] = 10.0,
    body_timeout: Annotated[
        float, typer.Option(min=0.1, help="Seconds a request body may pause between two chunks (then closed)")
    ] = 30.0,
    max_connections: Annotated[int | None, typer.Option(min=1, help=MAX_CONNECTIONS_HELP, show_default=False)] = None,
    mcp: Annotated[bool, typer.Option("--mcp/--no-mcp", help="Also serve MCP (Streamable HTTP) at /mcp")] = True,
    mcp_stateless: Annotated[
        bool | None,
        typer.Option(
            "--mcp-stateless/--mcp-stateful",
            help="Serve /mcp without sessions (default: stateful; stateless with --workers > 1 or a PostgreSQL store)",
            show_default=False,
        ),
    ] = None,
    tool_names: Annotated[
        str, typer.Option("--tool-names", help="MCP tool names: dotted, underscore or both")
    ] = "both",
    ssh: Annotated[bool, typer.Option("--ssh", help="Also serve SSH (shell, sftp, afi subsystem): see afi ssh")] = (
        False
    ),
    ssh_port: Annotated[int, typer.Option(help="SSH port, with --ssh (0 picks a free one)")] = 2222,
    authorized_keys: Annotated[
        Path | None, typer.Option("--authorized-keys", help="SSH authorized-keys file, with --ssh")
    ] = None,
    host_key: Annotated[Path | None, typer.Option("--host-key", help="SSH host key file, with --ssh")] = None,
    oauth: Annotated[
        bool, typer.Option("--oauth/--no-oauth", help="Serve the built-in OAuth authorization server (/oauth/…)")
    ] = True,
    issuer: Annotated[
        str | None, typer.Option("--issuer", envvar="AFI_ISSUER", help=ISSUER_HELP, show_default=False)
    ] = None,
    audience: Annotated[
        str | None,
        typer.Option("--audience", envvar="AFI_AUDIENCE", help="The audience (aud) the issuer's tokens must name"),
    ] = None,
    space_claim: Annotated[
        str | None, typer.Option("--space-claim", help="The JWT claim naming a token's space [default: the server's]")
    ] = None,
    scope_claim: Annotated[str, typer.Option("--scope-claim", help="The JWT claim holding a token's scopes")] = "scope",
    client_metadata: Annotated[
        bool, typer.Option("--client-metadata/--no-client-metadata", help=CLIENT_METADATA_HELP)
    ] = True,
    allow_hosts: Annotated[
        list[str] | None, typer.Option("--client-metadata-allow-host", help=ALLOW_HOST_HELP, show_default=False)
    ] = None,
    metadata_ca: Annotated[Path | None, typer.Option("--client-metadata-ca", help=CA_HELP, show_default=False)] = None,
    embedder: Annotated[str | None, typer.Option("--embedder", help=EMBEDDER_HELP, show_default=False)] = None,
) -> None:
    """Serve the memory over HTTP/JSON (routes /afi/…, manifest at /.afi/manifest.json, docs at /docs) and MCP
    (Streamable HTTP at /mcp)."""
    if tool_names not in ("dotted", "underscore", "both"):
        raise typer.BadParameter("use dotted, underscore or both", param_hint="--tool-names")
    if embedder is not None and embedder not in ("minilm", "hash"):
        raise typer.BadParameter(f"{embedder!r} is not an embedder: use minilm or hash", param_hint="--embedder")
    if workers > 1 and ssh:
        _refuse("--ssh runs in one process: use --workers 1 with --ssh, or run 'afi ssh' beside 'afi serve --workers'")
    if workers > 1 and mcp and mcp_stateless is False:
        _refuse("--mcp-stateful needs --workers 1: a session lives in the memory of the worker that opened it")
    from ..auth.keys import KeyStore
    from ..storage.database import is_postgres_url

    issued = _issuer(issuer, audience, space_claim, scope_claim, space)
    documents = _client_metadata(client_metadata, allow_hosts or [], metadata_ca)
    db_path = resolve_db(db)
    with afi_errors():
        keys = KeyStore(db_path)
    no_keys = keys.keyless()
    keys.close()
    if not is_loopback(host) and no_keys and issued is None:
        _refuse(
            f"refusing to listen on {host}: no API key was ever created, so anyone who can reach it would own the "
            "memory. Create one first (afi token create --scope afi:write) or bind 127.0.0.1."
        )
    _keep_owner_token(db_path)
    from afi.app.serve import AppSpec, Listen, open_server, prebuild, serve_workers

    root_path = resolve_root(root, db_path)
    # a replica on PostgreSQL may be one of several behind a load balancer: no MCP session lives in
    # one process's memory unless asked for (--mcp-stateful, with the balancer's sticky sessions)
    stateless = mcp_stateless if mcp_stateless is not None else (workers > 1 or is_postgres_url(str(db_path)))
    spec = AppSpec(
        db_path,
        root_path,
        space,
        rate,
        burst,
        mcp,
        stateless,
        tool_names,
        issued,
        oauth,
        client_metadata=documents,
        embedder=embedder,
    )
    listen = Listen(host, port, header_timeout, body_timeout, max_connections)
    if workers > 1:
        with afi_errors():
            prebuild(spec)
        code = serve_workers(spec, listen, workers)
        if code:
            raise typer.Exit(code)
        return
    with afi_errors():
        server, provider = open_server(spec, listen)
    if ssh:
        from afi.app.ssh import SshOptions, run_beside

        with afi_errors(), refusals():
            run_beside(server, provider, db_path, SshOptions(host, ssh_port, authorized_keys, host_key))
        return
    server.run()


def _issuer(
    issuer: str | None, audience: str | None, space_claim: str | None, scope_claim: str, space: str | None
) -> IssuerConfig | None:
    """Check the issuer options; return them, or None without ``--issuer``."""
    from ..auth.oauth.issuer import IssuerConfig

    if issuer is None:
        if audience is not None or space_claim is not None:
            _refuse("--audience and --space-claim go with --issuer")
        return None
    parts = urlsplit(issuer)
    if parts.scheme != "https" and not (parts.scheme == "http" and is_loopback(parts.netloc)):
        _refuse(f"--issuer must be an https URL (http only on this machine), not {issuer!r}")
    if parts.query or parts.fragment:
        _refuse("--issuer must have no query or fragment")
    if not audience:
        _refuse("--issuer needs --audience: the value the issuer puts in its tokens' aud claim for this server")
    return IssuerConfig(issuer.rstrip("/"), audience, space_claim, scope_claim, space or "default")


def _client_metadata(enabled: bool, hosts: list[str], ca_file: Path | None) -> ClientMetadataPolicy:
    """Check the client-metadata options; return the policy they make."""
    from ..auth.oauth.client_policy import ClientMetadataPolicy

    if not enabled and (hosts or ca_file):
        _refuse("--client-metadata-allow-host and --client-metadata-ca have no use with --no-client-metadata")
    allowed = frozenset(host.strip().strip("[]").lower() for host in hosts)
    if any(not host or "/" in host or " " in host for host in allowed):
        _refuse("--client-metadata-allow-host takes a host name or address, not a URL")
    policy = ClientMetadataPolicy(enabled, allowed, str(ca_file) if ca_file else None)
    try:
        policy.tls()
    except (OSError, ValueError) as err:  # ssl.SSLError is an OSError
        _refuse(f"--client-metadata-ca {ca_file}: not a readable PEM file of CA certificates ({err})")
    return policy


def _keep_owner_token(db: Path | str) -> None:
    """Make sure the store's owner token exists, so the owner is served once keys exist (afi auth token)."""
    from ..auth.owner import ensure_owner_token
    from ..errors import AfiError

    try:
        ensure_owner_token(db)
    except (AfiError, OSError) as err:
        stderr().print(f"afi: warning: {err}", markup=False)


def _refuse(message: str) -> NoReturn:
    stderr().print(f"afi: {message}", markup=False)
    raise typer.Exit(2)


def register(app: typer.Typer) -> None:
    """Add ``afi serve`` to ``app``."""
    app.command("serve")(serve)
