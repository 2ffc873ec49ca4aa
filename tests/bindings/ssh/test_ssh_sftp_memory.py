"""What an SFTP session keeps in memory (files under names the provider refuses) stays bounded.

A real SSH server with small limits runs in a thread of this process; asyncssh's SFTP client drives it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from afi.bindings.ssh import SshLimits, start_ssh_server
from afi.providers.memory.provider import MemoryProvider


@pytest.fixture
def port(tmp_path: Path) -> Iterator[int]:
    """A keyless SSH server on loopback whose SFTP sessions hold 3 memory-only files, 1000 bytes, 1 s idle."""
    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    limits = SshLimits(connections_per_minute=0, commands_per_minute=0, local_files=3, local_bytes=1000, local_idle=1.0)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="afi-ssh", daemon=True)
    thread.start()
    start = start_ssh_server(
        provider, port=0, host_key=tmp_path / "host_key", verify_key=None, keyless=True, limits=limits
    )
    acceptor = asyncio.run_coroutine_threadsafe(start, loop).result(30)
    try:
        yield acceptor.get_port()
    finally:
        asyncio.run_coroutine_threadsafe(_closed(acceptor), loop).result(30)  # on the loop's own thread
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def _closed(acceptor: Any) -> None:
    acceptor.close()
    await acceptor.wait_closed()


@asynccontextmanager
async def session(port: int) -> AsyncIterator[asyncssh.SFTPClient]:
    async with (
        asyncssh.connect(
            "127.0.0.1", port=port, username="agent", known_hosts=None, client_keys=None, agent_path=None
        ) as conn,
        conn.start_sftp_client() as sftp,
    ):
        yield sftp


async def put(sftp: asyncssh.SFTPClient, path: str, data: bytes) -> None:
    async with sftp.open(path, "wb") as out:
        await out.write(data)


async def get(sftp: asyncssh.SFTPClient, path: str) -> bytes:
    async with sftp.open(path, "rb") as back:
        data = await back.read()
    assert isinstance(data, bytes)
    return data


def run(scenario: Any) -> Any:
    return asyncio.run(scenario)


def test_memory_only_files_past_the_count_are_refused(port: int) -> None:
    async def scenario() -> None:
        async with session(port) as sftp:
            for n in range(3):
                await put(sftp, f"/facts/sed{n}", b"x\n")
            with pytest.raises(asyncssh.SFTPError, match=r"too_large: .*3 such files are the most one session holds"):
                await put(sftp, "/facts/sed3", b"x\n")
            assert sorted(n for n in await sftp.listdir("/facts") if n.startswith("sed")) == ["sed0", "sed1", "sed2"]
            await sftp.posix_rename("/facts/sed0", "/facts/kept.md")  # stored: no longer held in memory
            await sftp.remove("/facts/sed1")
            await put(sftp, "/facts/sed3", b"x\n")
            await put(sftp, "/facts/sed4", b"x\n")
        async with session(port) as fresh:  # another session holds none of them
            assert sorted(n for n in await fresh.listdir("/facts") if n != "." and n != "..") == ["kept.md"]

    run(scenario())


def test_memory_only_files_past_the_bytes_are_refused(port: int) -> None:
    async def scenario() -> None:
        async with session(port) as sftp:
            await put(sftp, "/facts/big.tmp", b"a" * 600)
            with pytest.raises(asyncssh.SFTPError, match=r"too_large: .*1000 bytes together"):
                await put(sftp, "/facts/more.tmp", b"b" * 600)
            await put(sftp, "/files/big.bin", b"c" * 5000)  # a file the provider stores is not counted
            await sftp.remove("/facts/big.tmp")
            await put(sftp, "/facts/more.tmp", b"b" * 600)
            assert (await sftp.stat("/facts/more.tmp")).size == 600

    run(scenario())


def test_what_open_handles_hold_counts_against_the_bytes(port: int) -> None:
    """Two files held open and written, neither closed: their buffers count, not only what was closed."""

    async def scenario() -> None:
        async with session(port) as sftp:
            first = await sftp.open("/facts/one.tmp", "wb")
            second = await sftp.open("/facts/two.tmp", "wb")
            await first.write(b"a" * 600)
            with pytest.raises(asyncssh.SFTPError, match=r"too_large: .*1000 bytes together"):
                await second.write(b"b" * 600)
            await second.write(b"b" * 300)
            await first.close()
            await second.close()
            assert (await sftp.stat("/facts/one.tmp")).size == 600
            assert (await sftp.stat("/facts/two.tmp")).size == 300

    run(scenario())


def test_a_memory_only_file_unused_for_a_while_is_dropped(port: int) -> None:
    async def scenario() -> None:
        async with session(port) as sftp:
            await put(sftp, "/facts/stray.tmp", b"stray\n")
            held = await sftp.open("/facts/held.tmp", "wb")
            await held.write(b"still open\n")
            await asyncio.sleep(1.2)
            names = await sftp.listdir("/facts")
            assert "stray.tmp" not in names and "held.tmp" in names  # an open file is never stale
            with pytest.raises(asyncssh.SFTPNoSuchFile):
                await sftp.stat("/facts/stray.tmp")
            await held.close()
            await sftp.posix_rename("/facts/held.tmp", "/facts/held.md")
            assert (await get(sftp, "/facts/held.md")).endswith(b"\n---\nstill open\n")

    run(scenario())


def test_a_rename_that_comes_before_the_close_moves_what_was_written(port: int) -> None:
    """sshfs sends CLOSE after the program's close() returned, so its rename (sed -i, mv) can come first."""

    async def scenario() -> None:
        async with session(port) as sftp:
            for temp, final in (("/files/save.tmp", "/files/save.txt"), ("/facts/sedXYZ", "/facts/saved.md")):
                early = await sftp.open(temp, "wb")
                await early.write(b"written before the rename\n")
                await sftp.posix_rename(temp, final)
                await early.close()
                assert (await get(sftp, final)).endswith(b"written before the rename\n")
                with pytest.raises(asyncssh.SFTPNoSuchFile):
                    await sftp.stat(temp)

    run(scenario())


def test_a_stat_of_a_note_being_written_shows_the_size_it_is_stored_with(port: int) -> None:
    """sshfs and the kernel keep the size a stat reports; a note is stored with its front matter."""

    async def scenario() -> None:
        async with session(port) as sftp:
            writing = await sftp.open("/facts/sized.md", "wb")
            await writing.write(b"Bob cycles to work\n")
            by_handle, by_path = (await writing.stat()).size, (await sftp.stat("/facts/sized.md")).size
            await writing.close()
            note = await get(sftp, "/facts/sized.md")
            assert note.endswith(b"\n---\nBob cycles to work\n") and by_handle == by_path == len(note)

            refused = await sftp.open("/facts/binary.md", "wb")
            await refused.write(b"\xff\xfe not text")
            assert (await refused.stat()).size == len(b"\xff\xfe not text")  # not stored: what was written
            with pytest.raises(asyncssh.SFTPError, match="invalid_path: notes are UTF-8 text"):
                await refused.close()
            with pytest.raises(asyncssh.SFTPNoSuchFile):
                await sftp.stat("/facts/binary.md")

    run(scenario())


def test_a_stat_of_a_workspace_file_being_copied_stores_nothing(port: int) -> None:
    """``ls -l`` during a copy: the size is what was written so far, and another session still sees no
    file until the copy closes it (a copy that died there would leave nothing half-written)."""

    async def scenario() -> None:
        async with session(port) as sftp, session(port) as other:
            copying = await sftp.open("/files/copy.bin", "wb")
            await copying.write(b"first half ")
            assert (await sftp.stat("/files/copy.bin")).size == len(b"first half ")
            assert (await copying.stat()).size == len(b"first half ")
            with pytest.raises(asyncssh.SFTPNoSuchFile):
                await other.stat("/files/copy.bin")
            await copying.write(b"second half")
            await copying.close()
            assert await get(other, "/files/copy.bin") == b"first half second half"

    run(scenario())
