"""API keys on both engines: create, verify, list, revoke, authenticate; only a hash is kept."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from afi.auth.keys import LOCAL_OWNER, TOKEN_PREFIX, KeyStore
from afi.auth.owner import ensure_owner_token
from afi.cli import _register_all, app
from afi.errors import InvalidPath, Unauthorized
from afi.storage.database import is_postgres_url, open_database


@pytest.fixture
def store(store_url: str) -> KeyStore:
    return KeyStore(store_url)


def test_a_created_key_verifies_to_its_space_and_scopes(store: KeyStore) -> None:
    record, token = store.create(space="team-a", scopes=("afi:read", "afi:write"), name="ci")
    assert token.startswith(TOKEN_PREFIX) and len(token) > 40
    caller = store.verify(token)
    assert caller is not None
    assert (caller.principal, caller.space, caller.scopes) == (
        record.id,
        "team-a",
        frozenset({"afi:read", "afi:write"}),
    )
    assert record.name == "ci" and record.active


def test_the_default_key_reads_only(store: KeyStore) -> None:
    _, token = store.create()
    caller = store.verify(token)
    assert caller is not None and caller.space == "default"
    assert caller.has("afi:read") and not caller.has("afi:write")


def test_only_a_hash_is_stored(store: KeyStore, store_url: str, tmp_path: Path) -> None:
    _, token = store.create(scopes=("afi:admin",))
    store.close()
    if is_postgres_url(store_url):
        with open_database(store_url).read() as conn:
            raw = repr(conn.execute("SELECT * FROM afi_keys").fetchall()).encode()
    else:
        raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("afi.db"))
    assert token.encode() not in raw
    assert token[len(TOKEN_PREFIX) :].encode() not in raw


def test_unknown_tokens_do_not_verify(store: KeyStore) -> None:
    _, token = store.create()
    assert store.verify(token + "x") is None
    assert store.verify("afi_" + "A" * 43) is None
    assert store.verify("not-even-prefixed") is None


def test_revoking_stops_a_token_and_is_reported_once(store: KeyStore) -> None:
    record, token = store.create()
    assert store.revoke(record.id) is True
    assert store.verify(token) is None
    assert store.revoke(record.id) is False
    assert store.revoke("key_missing") is False
    (listed,) = store.list()
    assert listed.id == record.id and listed.revoked_at is not None and not listed.active


def test_list_never_holds_tokens_and_count_counts_active_keys(store: KeyStore) -> None:
    tokens = [store.create(name=f"k{i}")[1] for i in range(3)]
    store.revoke(store.list()[0].id)
    records = store.list()
    assert [r.name for r in records] == ["k0", "k1", "k2"]
    assert all(token not in repr(records) for token in tokens)
    assert (store.count(), store.count(revoked=True)) == (2, 3)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"scopes": ("afi:root",)}, "unknown scope 'afi:root'", id="unknown-scope"),
        pytest.param({"scopes": ()}, "at least one scope", id="no-scope"),
        pytest.param({"space": "../etc"}, "bad space name", id="space-traversal"),
        pytest.param({"space": ""}, "bad space name", id="empty-space"),
        pytest.param({"space": "Upper"}, "bad space name", id="upper-case-space"),
        pytest.param({"name": "n" * 201}, "at most 200", id="long-name"),
    ],
)
def test_bad_key_requests_are_refused_and_nothing_is_stored(
    store: KeyStore, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidPath, match=message) as caught:
        store.create(**kwargs)
    assert caught.value.code == "invalid_path"
    assert store.count() == 0


def test_without_keys_a_missing_token_is_the_local_owner(store: KeyStore) -> None:
    assert store.authenticate(None) == LOCAL_OWNER
    assert LOCAL_OWNER.has("afi:admin") and LOCAL_OWNER.space == "default"


def test_once_a_key_exists_a_token_is_required_and_checked(store: KeyStore) -> None:
    record, token = store.create(scopes=("afi:write",))
    with pytest.raises(Unauthorized, match="requires an API key"):
        store.authenticate(None)
    with pytest.raises(Unauthorized, match="unknown or revoked"):
        store.authenticate("afi_bogus")
    assert store.authenticate(token).principal == record.id


def test_revoking_every_key_keeps_the_server_closed_and_the_owner_token_open(store: KeyStore, store_url: str) -> None:
    first, _ = store.create()
    second, token = store.create()
    assert not store.keyless()
    store.revoke(first.id)
    with pytest.raises(Unauthorized, match="afi auth token"):
        store.authenticate(None)
    store.revoke(second.id)
    assert not store.keyless(), "a revoked key still counts: revoking the only key must close a server"
    with pytest.raises(Unauthorized, match="requires an API key"):
        store.authenticate(None)
    with pytest.raises(Unauthorized, match="unknown or revoked"):
        store.authenticate(token)
    assert store.authenticate(ensure_owner_token(store_url)) == LOCAL_OWNER


def test_a_second_store_on_the_same_store_sees_the_key(store: KeyStore, store_url: str) -> None:
    _, token = store.create()
    other = KeyStore(store_url)
    assert other.verify(token) is not None
    assert other.list() == store.list()


def test_wal_mode_on_a_sqlite_file(tmp_path: Path) -> None:
    KeyStore(tmp_path / "afi.db").create()
    mode = sqlite3.connect(tmp_path / "afi.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_threads_create_and_verify_at_once(store: KeyStore) -> None:
    """4 threads create and verify 10 keys each at once (40 keys): every one verifies, all are counted."""
    results: list[bool] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(10):
            _, token = store.create(scopes=("afi:write",))
            ok = store.verify(token) is not None
            with lock:
                results.append(ok)
        store.close()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 40
    assert store.count() == 40


def test_afi_token_create_list_revoke(store_url: str) -> None:
    _register_all()
    runner = CliRunner()
    created = runner.invoke(
        app, ["token", "create", "--scope", "afi:write", "--space", "team-a", "--name", "ci", "--db", store_url]
    )
    assert created.exit_code == 0, created.output
    token = created.stdout.strip()
    caller = KeyStore(store_url).verify(token)
    assert caller is not None and (caller.space, caller.scopes) == ("team-a", frozenset({"afi:write"}))
    listed = runner.invoke(app, ["token", "list", "--db", store_url])
    assert listed.exit_code == 0 and caller.principal in listed.stdout and token not in listed.stdout
    assert runner.invoke(app, ["token", "revoke", caller.principal, "--db", store_url]).exit_code == 0
    again = runner.invoke(app, ["token", "revoke", caller.principal, "--db", store_url])
    assert again.exit_code == 2 and "no active key" in again.stderr
    assert KeyStore(store_url).verify(token) is None
