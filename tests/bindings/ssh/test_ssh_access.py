"""Who gets in over SSH and how much they may do: keys, the keyless loopback door, and the limits."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from afi.auth.ssh_keys import SshKeyStore
from afi.clients.ssh import SshClient
from afi.errors import RateLimited
from tests.support.servers import stop_process
from tests.support.ssh import OPTS, SshServer, add_key, keygen, ssh_server, start_afi
from tests.support.warm import AfiPopen


def test_a_key_attached_to_an_api_key_acts_as_its_principal(ssh_served: SshServer) -> None:
    assert ssh_served.ssh("echo owned > /facts/whose.md").code == 0
    line = ssh_served.ssh("ls -l /facts/whose.md").text
    owner, group = line.split()[2:4]
    assert owner.startswith("key_") and group == "default"


def test_unknown_and_revoked_keys_are_refused(ssh_served: SshServer, tmp_path: Path) -> None:
    refused = ssh_served.ssh("ls /", key="stranger")
    assert refused.code == 255 and "Permission denied" in refused.err and refused.out == b""
    late = keygen(tmp_path, "late")
    store = SshKeyStore(ssh_served.db)
    key_id = store.add(late.with_suffix(".pub").read_text(), scopes=("afi:read",)).id
    ssh_served.keys["late"] = late
    assert ssh_served.ssh("ls /", key="late").code == 0
    assert store.revoke(key_id)
    assert ssh_served.ssh("ls /", key="late").code == 255


def test_another_space_sees_nothing_of_this_one(ssh_served: SshServer) -> None:
    assert ssh_served.ssh("echo secret-canary > /facts/private.md").code == 0
    other = ssh_served.ssh("cat /facts/private.md", key="other")
    assert other.code == 2 and other.err.startswith("afi: /facts/private.md: not_found: ")
    assert ssh_served.ssh("grep -r secret-canary /", key="other").code == 1


def test_the_interactive_shell_has_a_prompt_line_editing_and_history(ssh_served: SshServer) -> None:
    # Typed keys: a backspace fixes a typo; the up arrow recalls the previous line.
    keys = b"cd /facts\r" + b"echx\x7fo first\r" + b"\x1b[A\r" + b"pwd\r" + b"exit\r"
    cmd = ["ssh", "-tt", "-p", str(ssh_served.port), "-i", str(ssh_served.keys["writer"]), *OPTS, "127.0.0.1"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    for key in keys.split(b"\r")[:-1]:
        proc.stdin.write(key + b"\r")
        proc.stdin.flush()
        time.sleep(0.3)
    out, _ = proc.communicate(timeout=30)
    text = out.decode("utf-8", "replace").replace("\r\n", "\n")
    assert "afi-memory shell as key_" in text  # keys typed ahead are echoed before it
    assert "afi:/facts$ " in text
    assert text.count("\nfirst\n") == 2, text  # typed once, recalled once
    assert "\n/facts\n" in text
    assert proc.returncode == 0


def test_working_connections_are_not_throttled_but_failed_logins_are_and_told_why(tmp_path: Path) -> None:
    """One command per connection (as the agents snippet says) never hits the limit; failed logins do,
    and then even a good key is refused with a message the client shows (not 'Permission denied')."""
    with ssh_server(tmp_path, "--conn-rate", "3", "--cmd-rate", "0") as limited:
        assert [limited.ssh("pwd").code for _ in range(6)] == [0] * 6
        strangers = [limited.ssh("pwd", key="stranger") for _ in range(3)]
        assert all(r.code == 255 and "Permission denied" in r.err for r in strangers)
        refused = limited.ssh("pwd")  # quiet (LogLevel=error): the disconnect reason still shows
        assert refused.code == 255 and refused.out == b""
        assert "afi: rate_limited: too many failed logins from 127.0.0.1 (at most 3 per minute)" in refused.err
        assert "Permission denied" not in refused.err
        # OpenSSH also shows the server's banner at its default log level.
        loud = [
            part for pair in zip(OPTS[::2], OPTS[1::2], strict=True) if pair[1] != "LogLevel=error" for part in pair
        ]
        cmd = ["ssh", "-p", str(limited.port), "-i", str(limited.keys["writer"]), *loud, "127.0.0.1", "pwd"]
        banner = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert banner.returncode == 255 and "too many failed logins" in banner.stderr


def test_a_session_over_the_command_limit_gets_rate_limited_with_retry_after(tmp_path: Path) -> None:
    with (
        ssh_server(tmp_path, "--conn-rate", "0", "--cmd-rate", "5") as limited,
        SshClient(port=limited.port, identity=limited.keys["writer"]) as client,
    ):
        for _ in range(5):
            client.stat("/")
        with pytest.raises(RateLimited) as caught:
            client.stat("/")
        assert caught.value.retry_after is not None and 0 < caught.value.retry_after <= 12
        time.sleep(caught.value.retry_after)
        limits = (client.manifest().model_extra or {})["x-limits"]  # waiting retry_after is enough
        assert limits["rate"]["burst"] == 5


def test_output_is_bounded_per_command(tmp_path: Path) -> None:
    with ssh_server(tmp_path, "--conn-rate", "0", "--cmd-rate", "0", "--output-cap", "1000") as small:
        assert small.ssh("cat > /files/big.txt", stdin=b"y" * 5000).code == 0
        run = small.ssh("cat /files/big.txt")
        assert run.code == 2 and len(run.out) == 1000
        assert run.err.startswith("afi: too_large: the output is over the 1000-byte cap per command")
        assert small.ssh("head -c 900 /files/big.txt").code == 0


def test_without_any_key_a_loopback_server_lets_the_local_owner_in(tmp_path: Path) -> None:
    with ssh_server(tmp_path, "--conn-rate", "0", keys=False) as open_door:
        run = open_door.ssh("echo hi > /facts/open.md; ls -l /facts")
        assert run.code == 0 and " local default " in run.text


def test_afi_serve_ssh_serves_http_and_ssh_from_one_process(tmp_path: Path) -> None:
    import httpx

    key = keygen(tmp_path, "k")
    args = ["serve", "--ssh", "--port", "0", "--ssh-port", "0", "--db", str(tmp_path / "afi.db")]
    args += ["--root", str(tmp_path / "files")]
    with start_afi(args, tmp_path / "xdg", wait_for=2) as ports:
        served = SshServer(port=ports["ssh"], db=tmp_path / "afi.db", root=tmp_path / "files", keys={"writer": key})
        assert served.ssh("echo both > /facts/both.md").code == 0
        answer = httpx.get(f"http://127.0.0.1:{ports['http']}/afi/read", params={"path": "/facts/both.md"})
        assert answer.status_code == 200 and answer.text.endswith("both\n")
    assert (tmp_path / "ssh_host_ed25519_key").exists(), "the host key lives beside the store"
    assert not (tmp_path / "xdg" / "afi" / "ssh_host_ed25519_key").exists()


def test_the_host_key_is_generated_once_and_kept(tmp_path: Path) -> None:
    from afi.bindings.ssh import load_host_key

    path = tmp_path / "keys" / "host"
    first = load_host_key(path)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    again = load_host_key(path)
    assert first.public_data == again.public_data


def _first_line(args: list[str], home: Path) -> str:
    """Run ``afi <args>`` until it prints its first line; return that line."""
    env = dict(os.environ, XDG_DATA_HOME=str(home))
    cmd = [sys.executable, "-c", "from afi.cli import main; main()", *args]
    proc = AfiPopen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        return proc.stdout.readline()
    finally:
        stop_process(proc)
        proc.communicate(timeout=10)  # closes both pipes


def test_the_start_line_counts_active_keys_and_the_host_key_is_beside_each_store(tmp_path: Path) -> None:
    stores = {}
    for name in ("one", "two"):
        folder = tmp_path / name
        folder.mkdir()
        db = folder / "afi.db"
        ids = [add_key(db, keygen(folder, f"k{n}").with_suffix(".pub")) for n in range(3)]
        SshKeyStore(db).revoke(ids[0])
        args = ["ssh", "--port", "0", "--db", str(db), "--root", str(folder / "files")]
        line = _first_line(args, tmp_path / "xdg")
        assert "(2 key(s) may log in)" in line, line
        stores[name] = (folder / "ssh_host_ed25519_key").read_bytes()
    assert stores["one"] != stores["two"], "two stores do not share a host key"
    assert not (tmp_path / "xdg" / "afi" / "ssh_host_ed25519_key").exists()
    given = tmp_path / "given_host_key"
    args = ["ssh", "--port", "0", "--db", str(tmp_path / "one" / "afi.db"), "--host-key", str(given)]
    assert "listening on ssh://" in _first_line([*args, "--root", str(tmp_path / "files")], tmp_path / "xdg")
    assert given.exists()


def test_revoking_every_key_does_not_let_a_keyless_caller_in_again(tmp_path: Path) -> None:
    with ssh_server(tmp_path, "--conn-rate", "0") as ssh_served:
        assert ssh_served.ssh("pwd", key="stranger").code == 255
        from afi.auth.keys import KeyStore

        for record in SshKeyStore(ssh_served.db).list():
            SshKeyStore(ssh_served.db).revoke(record.id)
        api = KeyStore(ssh_served.db)
        for key in api.list():
            api.revoke(key.id)
        assert ssh_served.ssh("pwd", key="stranger").code == 255, "revoked keys still close the door"
        ssh_served.keys["owner"] = keygen(tmp_path, "owner")
        add_key(ssh_served.db, ssh_served.keys["owner"].with_suffix(".pub"), scopes=("afi:write",))
        run = ssh_served.ssh("echo back > /facts/back.md; cat /facts/back.md", key="owner")
        assert run.code == 0 and "back" in run.text, run.err
