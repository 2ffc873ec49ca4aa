"""``afi auth status``: which mode a store (and a server over it) is in, and why, in a few lines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from afi.auth.door import is_loopback_host
from afi.auth.keys import KeyStore
from afi.auth.owner import OwnerFile, owner_token_path
from afi.auth.ssh_keys import SshKeyStore
from afi.storage.database import is_postgres_url, store_label

__all__ = ["AuthStatus", "auth_status", "owner_token_for", "probe_server"]


@dataclass(frozen=True)
class AuthStatus:
    """What decides who gets in: active and revoked keys, and the owner's token file."""

    store: str
    api_active: int
    api_revoked: int
    ssh_active: int
    ssh_revoked: int
    owner: OwnerFile

    @property
    def keyless(self) -> bool:
        """True while no API key was ever issued (revoking keys never reopens keyless mode)."""
        return self.api_active + self.api_revoked == 0

    def lines(self) -> list[str]:
        """The report, one fact a line."""
        out = [f"store: {self.store}"]
        revoked = f" ({self.api_revoked} revoked)" if self.api_revoked else ""
        if self.keyless:
            out.append(
                "HTTP and MCP: keyless loopback: no API key was ever created, so a request from this machine "
                "with no token (and a loopback Host and Origin) is the owner; other machines are refused"
            )
        else:
            out.append(
                f"HTTP and MCP: keys required: {self.api_active} active API key(s){revoked}; a request needs "
                "'Authorization: Bearer <token>' (revoking keys does not reopen keyless mode: the owner "
                "uses Bearer $(afi auth token))"
            )
        ssh_revoked = f" ({self.ssh_revoked} revoked)" if self.ssh_revoked else ""
        if self.keyless and self.ssh_active + self.ssh_revoked == 0:
            out.append("SSH: keyless loopback: no SSH or API key was ever added, unless --authorized-keys")
        else:
            out.append(
                f"SSH: keys required: {self.ssh_active} active SSH key(s){ssh_revoked}, plus --authorized-keys lines"
            )
        out.append(f"owner token: {self._owner()}")
        out.append("local commands (afi mount, afi mcp, afi remember/recall/search) open the store as its owner")
        return out

    def _owner(self) -> str:
        where = self.owner.path
        if self.owner.token is not None:
            return f"{where} (mode 600): a server over this store takes it as the owner: Bearer $(afi auth token)"
        if self.owner.problem is not None:
            return f"{where} is not used: {self.owner.problem}"
        return f"{where} does not exist yet ('afi auth token' or 'afi serve' creates it)"


def auth_status(db: Path | str) -> AuthStatus:
    """Given the store, return what decides who may come in (a SQLite file that does not exist has no keys)."""
    owner = OwnerFile.read(owner_token_path(db))
    if not is_postgres_url(db) and not Path(db).exists():
        return AuthStatus(f"{db} (not created yet)", 0, 0, 0, 0, owner)
    api, ssh = KeyStore(db), SshKeyStore(db)
    api_active, ssh_active = api.count(), ssh.count()
    return AuthStatus(
        store=store_label(db),
        api_active=api_active,
        api_revoked=api.count(revoked=True) - api_active,
        ssh_active=ssh_active,
        ssh_revoked=ssh.count(revoked=True) - ssh_active,
        owner=owner,
    )


def owner_token_for(url: str, db: Path | str) -> str | None:
    """Given a server's URL and the store, return the owner's token to send it: only to this machine."""
    host = urlsplit(url).hostname  # not the netloc: user@ parts and ports are not the host
    if host is None or not is_loopback_host(host):
        return None
    return OwnerFile.read(owner_token_path(db)).token


def probe_server(url: str, token: str | None) -> list[str]:
    """Given a server's base URL, return what it says about auth, and whether it takes the owner's token."""
    import httpx

    base = url.rstrip("/")
    try:
        manifest = httpx.get(base + "/.afi/manifest.json", timeout=10)
    except httpx.HTTPError as err:
        return [f"server {base}: not reachable ({type(err).__name__}: {err})"]
    if manifest.status_code != 200:
        return [f"server {base}: the manifest answered HTTP {manifest.status_code}"]
    required = bool(manifest.json().get("auth", {}).get("required"))
    out = [f"server {base}: " + ("keys required" if required else "keyless loopback (its store has no active key)")]
    anonymous = httpx.get(base + "/afi/stat", params={"path": "/"}, timeout=10).status_code
    out.append(f"server {base}: a request with no token gets HTTP {anonymous}")
    if token is not None:
        owned = httpx.get(
            base + "/afi/stat", params={"path": "/"}, headers={"Authorization": f"Bearer {token}"}, timeout=10
        ).status_code
        verdict = "the owner" if owned == 200 else "refused (is it serving another store?)"
        out.append(f"server {base}: the owner token gets HTTP {owned}: {verdict}")
    return out
