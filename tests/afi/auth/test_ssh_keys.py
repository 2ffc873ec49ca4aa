"""SSH keys as principals: the store, the authorized-keys file, and ``afi token ssh``."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from afi.auth.authorized_keys import AuthorizedKeys, caller_for, fingerprint, parse_key_line
from afi.auth.keys import KeyStore
from afi.auth.ssh_keys import SshKeyStore
from afi.cli import _register_all, app
from afi.errors import InvalidPath
from tests.support.ssh import SshServer, keygen, start_afi


def _blob(public: Path) -> bytes:
    return parse_key_line(public.read_text()).blob


def test_the_fingerprint_is_openssh_s(tmp_path: Path) -> None:
    import subprocess

    key = keygen(tmp_path, "k")
    shown = subprocess.run(["ssh-keygen", "-l", "-f", str(key)], capture_output=True, text=True, check=True).stdout
    assert fingerprint(_blob(key.with_suffix(".pub"))) == shown.split()[1]


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("", id="empty"),
        pytest.param("ssh-ed25519", id="no-blob"),
        pytest.param("ssh-ed25519 !!!notbase64", id="bad-base64"),
        pytest.param("ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl", id="type-lie"),
        pytest.param("foo-key AAAA", id="unknown-type"),
    ],
)
def test_malformed_key_lines_are_refused(line: str) -> None:
    with pytest.raises(InvalidPath):
        parse_key_line(line)


def test_options_map_a_key_to_a_caller(tmp_path: Path) -> None:
    public = keygen(tmp_path, "k").with_suffix(".pub").read_text().strip()
    plain = caller_for(parse_key_line(public))
    assert plain.scopes == frozenset({"afi:read", "afi:write"}), "a plain line is the owner's: read and write"
    assert plain.space == "default" and plain.principal.startswith("ssh:")
    narrowed = caller_for(parse_key_line(f'afi-scopes="afi:read" {public}'))
    assert narrowed.scopes == frozenset({"afi:read"})
    rich = caller_for(
        parse_key_line(f'restrict,afi-space="work",afi-scopes="afi:read afi:write",afi-principal="al" {public}')
    )
    assert (rich.principal, rich.space, rich.scopes) == ("al", "work", frozenset({"afi:read", "afi:write"}))
    with pytest.raises(InvalidPath):
        caller_for(parse_key_line(f'afi-scopes="afi:root" {public}'))


def test_an_authorized_keys_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    first, second = keygen(tmp_path, "a").with_suffix(".pub"), keygen(tmp_path, "b").with_suffix(".pub")
    listed = tmp_path / "authorized_keys"
    listed.write_text(f"# a comment\n{first.read_text()}")
    keys = AuthorizedKeys(listed)
    assert keys.lookup(_blob(first)) is not None and keys.lookup(_blob(second)) is None
    listed.write_text(f'afi-scopes="afi:write" {second.read_text()}')
    import os

    os.utime(listed, ns=(listed.stat().st_mtime_ns + 10**9,) * 2)
    assert keys.lookup(_blob(first)) is None
    caller = keys.lookup(_blob(second))
    assert caller is not None and caller.has("afi:write")


def test_a_bad_authorized_keys_line_fails_loudly_naming_the_line(tmp_path: Path) -> None:
    listed = tmp_path / "ak"
    listed.write_text("ssh-ed25519 AAAA broken\n")
    with pytest.raises(InvalidPath, match=r"ak:1: "):
        AuthorizedKeys(listed)
    with pytest.raises(InvalidPath, match="does not exist"):
        AuthorizedKeys(tmp_path / "missing")


def test_the_store_adds_verifies_and_revokes(tmp_path: Path, store_url: str) -> None:
    db = store_url
    own, attached = keygen(tmp_path, "own").with_suffix(".pub"), keygen(tmp_path, "att").with_suffix(".pub")
    store, api = SshKeyStore(db), KeyStore(db)
    record = store.add(own.read_text(), space="s1", scopes=("afi:write",))
    caller = store.verify(_blob(own))
    assert caller is not None and (caller.principal, caller.space) == (record.id, "s1") and caller.has("afi:write")
    with pytest.raises(InvalidPath, match="already added"):
        store.add(own.read_text())
    with pytest.raises(InvalidPath, match="unknown scope"):
        store.add(attached.read_text(), scopes=("afi:everything",))
    with pytest.raises(InvalidPath, match="no active API key"):
        store.add(attached.read_text(), api_key="key_nope")
    api_record, _ = api.create(space="s2", scopes=("afi:read",))
    store.add(attached.read_text(), api_key=api_record.id)
    acting = store.verify(_blob(attached))
    assert acting is not None and (acting.principal, acting.space) == (api_record.id, "s2")
    api.revoke(api_record.id)
    assert store.verify(_blob(attached)) is None, "revoking the API key stops its SSH key too"
    assert store.revoke(record.id) and not store.revoke(record.id)
    assert store.verify(_blob(own)) is None
    assert [r.active for r in store.list()] == [False, True]
    assert (store.count(), store.count(revoked=True)) == (1, 2)


def test_threads_adding_one_key_at_once_add_it_once(tmp_path: Path, store_url: str) -> None:
    """6 threads add the same 3 keys at once (one start line per key, 18 adds): each key is added by
    exactly one thread; the other 5 are told it was already added, as the one that won."""
    keys = [keygen(tmp_path, f"k{n}").with_suffix(".pub").read_text() for n in range(3)]
    store = SshKeyStore(store_url)
    start = threading.Barrier(6)
    added: list[str] = []
    refused: list[str] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def add_each() -> None:
        for line in keys:
            start.wait()
            try:
                record = store.add(line, scopes=("afi:write",))
            except InvalidPath as err:
                with lock:
                    refused.append(err.message)
            except BaseException as err:
                with lock:
                    failures.append(err)
            else:
                with lock:
                    added.append(record.id)

    threads = [threading.Thread(target=add_each) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(added) == 3 and len(refused) == 15
    assert sorted(r.id for r in store.list()) == sorted(added)
    assert all("already added as ssh_" in message for message in refused)


def test_afi_token_ssh_add_list_revoke(tmp_path: Path, store_url: str) -> None:
    _register_all()
    db = store_url
    public = keygen(tmp_path, "cli").with_suffix(".pub")
    runner = CliRunner()
    added = runner.invoke(app, ["token", "ssh", "add", str(public), "--scope", "afi:write", "--db", db])
    assert added.exit_code == 0, added.output
    key_id, shown = added.stdout.split()[:2]
    assert key_id.startswith("ssh_") and shown == fingerprint(_blob(public))
    listed = runner.invoke(app, ["token", "ssh", "list", "--db", db])
    assert key_id in listed.stdout
    again = runner.invoke(app, ["token", "ssh", "add", str(public), "--db", db])
    assert again.exit_code == 2 and "already added" in again.stderr
    assert runner.invoke(app, ["token", "ssh", "revoke", key_id, "--db", db]).exit_code == 0
    assert runner.invoke(app, ["token", "ssh", "revoke", key_id, "--db", db]).exit_code == 2


def test_a_revoked_key_can_be_added_again_as_a_new_grant(tmp_path: Path, store_url: str) -> None:
    _register_all()
    public = keygen(tmp_path, "back").with_suffix(".pub")
    runner = CliRunner()
    first = runner.invoke(app, ["token", "ssh", "add", str(public), "--db", store_url]).stdout.split()[0]
    assert runner.invoke(app, ["token", "ssh", "revoke", first, "--db", store_url]).exit_code == 0
    again = runner.invoke(app, ["token", "ssh", "add", str(public), "--scope", "afi:write", "--db", store_url])
    assert again.exit_code == 0, again.stderr
    second, shown = again.stdout.split()[:2]
    assert second != first and shown == fingerprint(_blob(public))
    store = SshKeyStore(store_url)
    caller = store.verify(_blob(public))
    assert caller is not None and (caller.principal, caller.has("afi:write")) == (second, True)
    listed = [(r.id, r.fingerprint, r.active) for r in store.list()]
    assert listed == [(first, shown, False), (second, shown, True)], "the old grant stays listed, revoked"
    assert store.count() == 1 and store.count(revoked=True) == 2
    refused = runner.invoke(app, ["token", "ssh", "add", str(public), "--db", store_url])
    assert refused.exit_code == 2 and f"already added as {second}" in refused.stderr
    assert store.revoke(second) and store.add(public.read_text()).id not in (first, second)


def test_a_server_with_an_authorized_keys_file_maps_each_key(tmp_path: Path) -> None:
    writer, reader = keygen(tmp_path, "w"), keygen(tmp_path, "r")
    listed = tmp_path / "authorized_keys"
    owner = keygen(tmp_path, "o")
    listed.write_text(
        f'afi-scopes="afi:write",afi-principal="wendy" {writer.with_suffix(".pub").read_text()}'
        f'afi-scopes="afi:read" {reader.with_suffix(".pub").read_text()}'
        f"{owner.with_suffix('.pub').read_text()}"
    )
    (tmp_path / "up.md").write_text("Put over sftp by the owner.\n")
    args = ["ssh", "--port", "0", "--db", str(tmp_path / "afi.db"), "--root", str(tmp_path / "files")]
    args += ["--authorized-keys", str(listed), "--conn-rate", "0"]
    with start_afi(args, tmp_path / "xdg") as ports:
        keys = {"w": writer, "r": reader, "o": owner}
        server = SshServer(ports["ssh"], tmp_path / "afi.db", tmp_path / "files", keys)
        wrote = server.ssh("echo hi > /facts/ak.md; ls -l /facts/ak.md", key="w")
        assert wrote.code == 0 and " wendy default " in wrote.text
        refused = server.ssh("rm /facts/ak.md", key="r")
        assert refused.code == 2 and ": forbidden: " in refused.err
        # A plain line (the owner's own id_ed25519.pub, no options) reads and writes the default space.
        plain = server.ssh("echo mine > /facts/plain.md; cat /facts/plain.md", key="o")
        assert plain.code == 0 and plain.text.endswith("mine\n"), plain.err
        put = server.sftp("put up.md /facts/up.md\n", key="o", cwd=tmp_path)
        assert put.code == 0, put.err
        assert server.ssh("cat /facts/up.md", key="r").text.endswith("Put over sftp by the owner.\n")
