"""The OAuth store's clients: the cap (a flood of registrations cannot lock real clients out), and
secrets kept from older versions."""

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


def test_a_client_whose_consent_is_pending_is_never_dropped(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Registered an hour ago, at the consent page a minute ago: the owner is approving it right now."""
    monkeypatch.setattr(oauth_store, "MAX_CLIENTS", 2)
    store = OAuthStore(open_database(store_url))
    assert store.add_client("pending", {"client_name": "pending"}) and store.add_client("idle", {"client_name": "i"})
    store.issue("request", "pending", None, oauth_store.REQUEST_SECONDS, {"space": "default"})
    _age(store_url, "pending", 3600)
    _age(store_url, "idle", 1800)
    assert store.add_client("new", {"client_name": "new"})
    assert store.client("pending") is not None and store.client("idle") is None
    _age(store_url, "pending", 2 * 86400)  # nor by the purge of day-old unapproved clients
    assert store.add_client("newer", {"client_name": "newer"}) is False
    assert store.client("pending") is not None


def test_nothing_is_granted_to_a_client_that_is_gone(store_url: str) -> None:
    store = OAuthStore(open_database(store_url))
    with pytest.raises(ValueError, match="no longer registered"):
        store.add_grant("no-such-client", "default", ["afi:read"], "http://127.0.0.1:1/mcp", "key_admin")
    assert store.grants() == []


def test_a_null_secret_kept_by_an_older_version_is_no_secret(store_url: str) -> None:
    store = OAuthStore(open_database(store_url))
    assert store.add_client("nul", {"client_name": "nul", "client_secret": None})
    assert store.add_client("old", {"client_name": "old", "client_secret": "s3cret"})
    assert store.client_secret_digest("nul") is None, "the text 'None' must not become a secret"
    assert store.client_secret_digest("old") == oauth_store.digest("s3cret")
    assert "client_secret" not in (store.client("old") or {}) and "client_secret" not in (store.client("nul") or {})
