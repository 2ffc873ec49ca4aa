"""What ``afi serve`` adds for OAuth: the built-in authorization server, or an external issuer's name.

With an issuer (``--issuer``), its JWTs are accepted by the key store (:func:`afi.app.local.open_provider`)
and the protected-resource metadata names it; the built-in server is then not served. Otherwise,
unless ``--no-oauth``, the built-in one is (:mod:`afi.bindings.http.oauth`).
"""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette

from afi.auth.oauth.client_policy import ClientMetadataPolicy
from afi.auth.oauth.issuer import IssuerConfig
from afi.auth.oauth.server import AfiAuthorizationServer
from afi.bindings.http.oauth import mount_oauth
from afi.storage.database import open_database

__all__ = ["mount_auth"]


def mount_auth(
    app: Starlette, db: Path | str, *, space: str | None, issuer: IssuerConfig | None, builtin: bool,
    client_metadata: ClientMetadataPolicy | None = None,
) -> None:  # fmt: skip
    """Given the app, its store and ``afi serve``'s options, serve the authorization server it asks for:
    the built-in one when ``builtin`` (:attr:`AppSpec.builtin_oauth`), else only the ``issuer``'s name."""
    server = None
    if builtin:
        spaces = {space} if space else None
        server = AfiAuthorizationServer(
            open_database(db), default_space=space or "default", allowed_spaces=spaces, client_metadata=client_metadata
        )
    mount_oauth(app, server, issuer=issuer.issuer if issuer is not None else None)
