"""The cap on registered OAuth clients: a flood of registrations cannot lock real clients out."""

from __future__ import annotations

import pytest

from afi.auth.oauth import store as oauth_store
from afi.auth.oauth.store import OAuthStore
from afi.storage.database import open_database


def _age(url: str, client_id: str, seconds: float) -> None:
    with open_database(url).transaction() as conn:
        conn.execute("UPDATE oauth_clients SET created_at = ? WHERE client_id = ?",
                     (oauth_store._ago(seconds), client_id))  # fmt: skip


def test_a_full_store_makes_room_from_its_oldest_unapproved_client(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(oauth_store, "MAX_CLIENTS", 4)
    store = OAuthStore(open_database(store_url))
    for n in range(4):
        assert store.add_client(f"flood-{n}", {"client_name": f"flood {n}"})
    # approved, or registered a moment ago (the owner may be on the consent page): kept; refused
    store.add_grant("flood-0", "default", ["afi:read"], "http://127.0.0.1:1/mcp", "key_admin")
    assert not store.add_client("late", {"client_name": "late"})
    # once the unapproved ones are older than a consent can wait, the oldest of them makes room
    for n, age in ((1, 3000), (2, 2000), (3, 1000)):
        _age(store_url, f"flood-{n}", age)
    _age(store_url, "flood-0", 9000)
    assert store.add_client("real", {"client_name": "a real agent"})
    assert store.client("flood-1") is None, "the oldest unapproved client went"
    assert store.client("flood-0") is not None, "an approved client is never dropped for room"
    assert store.client("flood-2") is not None and store.client("real") is not None
