"""SFTP over the AFI verbs, driven by OpenSSH's own ``sftp`` client."""

from __future__ import annotations

from pathlib import Path

import pytest

from afi.clients.ssh import SshClient
from afi.errors import NotFound
from tests.support.ssh import SshServer


def test_put_ls_rename_get_rm_mkdir_rmdir(ssh_served: SshServer, tmp_path: Path) -> None:
    payload = bytes(range(256)) * 300  # 76.8 kB: several SFTP write requests, binary
    (tmp_path / "up.bin").write_bytes(payload)
    run = ssh_served.sftp(
        "mkdir /files/up\n"
        "put up.bin /files/up/up.bin\n"
        "ls -l /files/up\n"
        "rename /files/up/up.bin /files/up/moved.bin\n"
        "get /files/up/moved.bin back.bin\n"
        "get /facts/note.md note.md\n",
        cwd=tmp_path,
    )
    assert run.code == 1  # the last get fails: /facts/note.md does not exist
    assert "up.bin" in run.text and f" {len(payload)} " in run.text
    assert (tmp_path / "back.bin").read_bytes() == payload
    with SshClient(port=ssh_served.port, identity=ssh_served.keys["reader"]) as reader:
        assert reader.read("/files/up/moved.bin").data == payload
        with pytest.raises(NotFound):
            reader.stat("/files/up/up.bin")
    done = ssh_served.sftp("rm /files/up/moved.bin\nrmdir /files/up\n", cwd=tmp_path)
    assert done.code == 0, done.err
    with SshClient(port=ssh_served.port, identity=ssh_served.keys["reader"]) as reader, pytest.raises(NotFound):
        reader.stat("/files/up")


def test_a_note_uploaded_over_sftp_is_remembered(ssh_served: SshServer, tmp_path: Path) -> None:
    (tmp_path / "n.md").write_text("Bob cycles to work every day.\n")
    assert ssh_served.sftp("put n.md /facts/bob-commute.md\n", cwd=tmp_path).code == 0
    found = ssh_served.ssh('search "how does Bob get to work"').text
    assert "/facts/bob-commute.md" in found


def test_a_read_only_key_cannot_upload_and_nothing_is_written(ssh_served: SshServer, tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("nope\n")
    run = ssh_served.sftp("put x.txt /files/ro.txt\n", key="reader", cwd=tmp_path)
    assert run.code != 0
    assert "forbidden" in run.err or "Permission denied" in run.err
    with SshClient(port=ssh_served.port, identity=ssh_served.keys["writer"]) as writer, pytest.raises(NotFound):
        writer.stat("/files/ro.txt")
    history = ssh_served.sftp("mkdir /history/x\n", cwd=tmp_path)
    assert history.code != 0
    memory_only = ssh_served.sftp("put x.txt /facts/sed1234\n", key="reader", cwd=tmp_path)
    assert memory_only.code != 0 and "Permission denied" in memory_only.err, "a reader makes no memory-only file"


def test_paths_outside_the_tree_are_refused(ssh_served: SshServer, tmp_path: Path) -> None:
    run = ssh_served.sftp("get /etc/passwd pw\n", cwd=tmp_path)
    assert run.code != 0 and not (tmp_path / "pw").exists()
    climb = ssh_served.sftp("get /files/../../etc/passwd pw\n", cwd=tmp_path)
    assert climb.code != 0 and not (tmp_path / "pw").exists()


def _sshfs_usable() -> bool:
    import os
    import shutil

    return (
        shutil.which("sshfs") is not None
        and shutil.which("fusermount3") is not None
        and os.access("/dev/fuse", os.W_OK)
    )


@pytest.mark.skipif(not _sshfs_usable(), reason="sshfs (Debian package sshfs) or /dev/fuse is not available")
def test_sshfs_mounts_the_tree(ssh_served: SshServer, tmp_path: Path) -> None:
    import subprocess

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    options = (
        f"IdentityFile={ssh_served.keys['writer']},StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes"
    )
    subprocess.run(
        ["sshfs", "-p", str(ssh_served.port), "-o", options, "127.0.0.1:/", str(mnt)], check=True, timeout=30
    )
    try:
        (mnt / "files" / "fs.txt").write_text("through sshfs canary\n")
        assert (mnt / "files" / "fs.txt").read_text() == "through sshfs canary\n"
        (mnt / "files" / "fs.txt").rename(mnt / "files" / "fs2.txt")
        grep = subprocess.run(["grep", "-r", "sshfs canary", str(mnt / "files")], capture_output=True, text=True)
        assert grep.stdout == f"{mnt}/files/fs2.txt:through sshfs canary\n"
        (mnt / "files" / "fs2.txt").unlink()
        assert {"facts", "files", "history", ".afi"} <= {p.name for p in mnt.iterdir()}
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], check=True, timeout=30)
    with SshClient(port=ssh_served.port, identity=ssh_served.keys["writer"]) as writer, pytest.raises(NotFound):
        writer.stat("/files/fs2.txt")


def test_a_reader_sees_a_write_whose_close_has_not_arrived(ssh_served: SshServer) -> None:
    """sshfs sends CLOSE after the program's close() returned, so a read can come first."""
    import asyncio

    import asyncssh

    async def scenario() -> bytes:
        key = asyncssh.read_private_key(str(ssh_served.keys["writer"]))
        async with (
            asyncssh.connect(
                "127.0.0.1", port=ssh_served.port, client_keys=[key], known_hosts=None, username="agent"
            ) as conn,
            conn.start_sftp_client() as sftp,
        ):
            writer = await sftp.open("/files/early.txt", "w")
            await writer.write("written, not yet closed\n")
            async with sftp.open("/files/early.txt", "r") as reader:
                seen = await reader.read()
            await writer.close()
            return seen.encode() if isinstance(seen, str) else seen

    assert asyncio.run(scenario()) == b"written, not yet closed\n"
    with SshClient(port=ssh_served.port, identity=ssh_served.keys["writer"]) as writer:
        assert writer.read("/files/early.txt").data == b"written, not yet closed\n"
        writer.delete("/files/early.txt")


def test_lsetstat_never_reaches_a_host_file(ssh_served: SshServer, tmp_path: Path) -> None:
    """``lsetstat@openssh.com`` (``chmod -h``, asyncssh's ``follow_symlinks=False``) fell through to
    asyncssh's own server method, which set the attributes of that path on the host: any key, a
    read-only one too, could chmod, truncate or re-date any file the server's user can. It is
    ``setstat`` of the tree now (the tree has no symbolic links to tell apart)."""
    import asyncio
    import os

    import asyncssh

    host_file = tmp_path / "host.txt"
    host_file.write_text("outside the tree\n")
    os.chmod(host_file, 0o600)
    before = os.stat(host_file)

    async def attempt(key: str) -> list[str]:
        identity = asyncssh.read_private_key(str(ssh_served.keys[key]))
        answers = []
        async with (
            asyncssh.connect("127.0.0.1", port=ssh_served.port, client_keys=[identity], known_hosts=None) as conn,
            conn.start_sftp_client() as sftp,
        ):
            for target in (str(host_file), "/files/../../" + str(host_file)):
                for call in (
                    sftp.chmod(target, 0o777, follow_symlinks=False),
                    sftp.utime(target, (1, 1), follow_symlinks=False),
                    sftp.setstat(target, asyncssh.SFTPAttrs(size=1), follow_symlinks=False),
                ):
                    try:
                        await call
                        answers.append("ok")
                    except asyncssh.SFTPError as err:
                        answers.append(str(err.reason))
        return answers

    for key in ("writer", "reader"):
        asyncio.run(attempt(key))
    after = os.stat(host_file)
    assert (after.st_mode, after.st_size, after.st_mtime) == (before.st_mode, before.st_size, before.st_mtime)
    assert host_file.read_text() == "outside the tree\n"

    async def in_the_tree() -> bytes:
        identity = asyncssh.read_private_key(str(ssh_served.keys["writer"]))
        async with (
            asyncssh.connect("127.0.0.1", port=ssh_served.port, client_keys=[identity], known_hosts=None) as conn,
            conn.start_sftp_client() as sftp,
        ):
            async with sftp.open("/files/cut.txt", "wb") as made:
                await made.write(b"0123456789")
            await sftp.setstat("/files/cut.txt", asyncssh.SFTPAttrs(size=4), follow_symlinks=False)
            async with sftp.open("/files/cut.txt", "rb") as cut:
                return bytes(await cut.read())

    assert asyncio.run(in_the_tree()) == b"0123"


def test_no_sftp_request_falls_through_to_the_host_filesystem() -> None:
    """asyncssh's ``SFTPServer`` serves the host's filesystem by default: every method of it that maps a
    client path (``map_path``) or touches a file object with ``os`` is the binding's own (the path
    mappings themselves and ``convert_attrs``, which only converts a stat result, touch nothing)."""
    import inspect

    import asyncssh

    from afi.bindings.ssh.sftp import AfiSFTPServer

    pure = ("map_path", "reverse_map_path", "convert_attrs")
    reaching = [
        name
        for name, member in vars(asyncssh.SFTPServer).items()
        if callable(member) and not name.startswith("_") and name not in pure
        and any(mark in inspect.getsource(member) for mark in ("map_path(", "os.", "open("))
    ]  # fmt: skip
    assert {"lsetstat", "open56", "fstatvfs", "setstat"} <= set(reaching), reaching
    inherited = [name for name in reaching if getattr(AfiSFTPServer, name) is getattr(asyncssh.SFTPServer, name)]
    assert not inherited, f"these SFTP requests reach the host's files: {inherited}"
