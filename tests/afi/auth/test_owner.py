"""The owner's token: a private file beside the store that stays the owner whatever keys exist."""

from __future__ import annotations

from pathlib import Path

import pytest

from afi.auth.keys import LOCAL_OWNER, KeyStore
from afi.auth.owner import OWNER_PREFIX, ensure_owner_token, owner_token_path
from afi.errors import Forbidden, Unauthorized


def test_the_owner_token_lives_beside_the_store_and_only_its_owner_may_read_it(tmp_path: Path) -> None:
    db = tmp_path / "work" / "afi.db"
    token = ensure_owner_token(db)
    path = owner_token_path(db)
    assert path == tmp_path / "work" / "afi.db.owner-token"
    assert token.startswith(OWNER_PREFIX) and path.read_text().strip() == token
    assert path.stat().st_mode & 0o777 == 0o600
    assert ensure_owner_token(db) == token, "made once, then kept"
    assert owner_token_path(tmp_path / "other.db") != path, "two stores in one folder have two tokens"


def test_the_owner_token_is_the_owner_while_keys_are_required(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    keys = KeyStore(db)
    keys.create(scopes=("afi:read",))
    token = ensure_owner_token(db)
    assert keys.authenticate(token) == LOCAL_OWNER
    with pytest.raises(Unauthorized):
        keys.authenticate(None)
    with pytest.raises(Unauthorized):
        keys.authenticate(OWNER_PREFIX + "guessed")
    owner_token_path(db).unlink()
    with pytest.raises(Unauthorized):
        keys.authenticate(token)  # a deleted file no longer lets anyone in
    again = ensure_owner_token(db)
    assert again != token and keys.authenticate(again) == LOCAL_OWNER  # a new file is read at once


def test_an_owner_token_file_others_may_read_is_not_used(tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    keys = KeyStore(db)
    keys.create()
    token = ensure_owner_token(db)
    owner_token_path(db).chmod(0o644)
    with pytest.raises(Unauthorized):
        keys.authenticate(token)
    with pytest.raises(Forbidden, match="chmod 600"):
        ensure_owner_token(db)


@pytest.mark.parametrize(
    ("url", "sent"),
    [
        ("http://127.0.0.1:8765", True),
        ("http://localhost:8765/", True),
        ("http://[::1]:8765", True),
        ("http://127.0.0.1:1@evil.example/", False),  # the host is evil.example: 127.0.0.1:1 is a user name
        ("http://evil.example/?127.0.0.1", False),
        ("http://10.0.0.5:8765", False),
        ("not a url", False),
    ],
)
def test_the_owner_token_is_sent_to_this_machine_only(tmp_path: Path, url: str, sent: bool) -> None:
    from afi.app.auth_status import owner_token_for

    db = tmp_path / "afi.db"
    token = ensure_owner_token(db)
    assert owner_token_for(url, db) == (token if sent else None)
