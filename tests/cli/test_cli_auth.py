"""The owner is never locked out, and revoking keys never reopens keyless mode: the owner token, ``afi auth status``."""

from __future__ import annotations

from pathlib import Path

import httpx

from afi.auth.keys import KeyStore
from tests.support.cli import afi
from tests.support.servers import start_afi_serve


def _stat(url: str, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(url + "/afi/stat", params={"path": "/"}, headers=headers, timeout=10).status_code


def test_the_owner_keeps_a_server_after_keys_exist_and_revoking_them_all_does_not_reopen_it(
    tmp_path: Path,
) -> None:
    db, root = tmp_path / "afi.db", tmp_path / "files"
    with start_afi_serve(db, root) as server:
        assert _stat(server.url) == 200, "keyless loopback, as before"
        made = afi("token", "create", "--scope", "afi:read", db=db)
        assert made.returncode == 0, made.stderr
        key_token = made.stdout.strip()
        refused = httpx.get(server.url + "/afi/stat", params={"path": "/"}, timeout=10)
        assert refused.status_code == 401 and "afi auth token" in refused.text
        owner = afi("auth", "token", db=db)
        assert owner.returncode == 0, owner.stderr
        token = owner.stdout.strip()
        assert (tmp_path / "afi.db.owner-token").stat().st_mode & 0o777 == 0o600
        assert _stat(server.url, token) == 200
        wrote = httpx.put(
            server.url + "/afi/write",
            params={"path": "/facts/owner.md"},
            content=b"The owner still writes.\n",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        assert wrote.status_code == 200, wrote.text
        assert _stat(server.url + "/spaces/team", token) == 200, "the owner works in every space"
        assert _stat(server.url, key_token) == 200
        status = afi("auth", "status", "--url", server.url, db=db)
        assert status.returncode == 0, status.stderr
        assert "keys required: 1 active API key(s)" in status.stdout
        assert str(tmp_path / "afi.db.owner-token") in status.stdout
        assert "the owner token gets HTTP 200: the owner" in status.stdout
        key_id = KeyStore(db).list()[0].id
        assert afi("token", "revoke", key_id, db=db).returncode == 0
        assert _stat(server.url, key_token) == 401, "the revoked key is refused"
        assert _stat(server.url) == 401, "revoking the only key closes the server: it does not reopen keyless mode"
        assert _stat(server.url, token) == 200, "the owner token still works"
        again = afi("auth", "status", db=db)
        assert "keys required: 0 active API key(s) (1 revoked)" in again.stdout
        assert "does not reopen keyless mode" in again.stdout
    assert _stat_forbidden_from_elsewhere(tmp_path / "fresh.db", root)


def _stat_forbidden_from_elsewhere(db: Path, root: Path) -> bool:
    """Keyless mode serves this machine only: a request arriving from another address is refused."""
    from afi.auth.door import Door
    from afi.errors import Forbidden
    from afi.providers.memory.provider import MemoryProvider

    door = Door(MemoryProvider(db, root))
    assert door.admit(authorization=None, address="127.0.0.1", host="127.0.0.1:8765").principal == "local"
    try:
        door.admit(authorization=None, address="192.0.2.7", host="127.0.0.1:8765")
    except Forbidden as err:
        return "only to this machine" in err.message
    return False


def test_conformance_against_a_keyed_server_on_this_machine_sends_the_owner_token(tmp_path: Path) -> None:
    db, root = tmp_path / "afi.db", tmp_path / "files"
    KeyStore(db).create(scopes=("afi:read",))
    with start_afi_serve(db, root) as server:
        run = afi("conformance", server.url, "--only", "write", "--json", db=db)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr


def test_a_server_starting_over_a_store_writes_its_owner_token(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    with start_afi_serve(db, tmp_path / "files"):
        path = tmp_path / "afi.db.owner-token"
        assert path.stat().st_mode & 0o777 == 0o600
    assert afi("auth", "token", db=db).stdout.strip() == path.read_text().strip()
