"""Exact and regex search over workspace files of any size, binary ones too, through every door
(issue 29): ``POST /afi/search``, MCP ``afi.search`` (the SDK client), the SSH shell's ``grep``
(real ``ssh``, compared with GNU grep run on the same files on disk), the mount's ``/.afi/search``.

Before, a file of 1 MiB or more, or a binary one, was found by no door (``grep -c ELF`` printed 0
where GNU grep prints 1), and a page the work budget cut short said nothing of it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from afi.providers.memory.workspace.file_index import REFRESH_SECONDS
from tests.support.cli import afi
from tests.support.doors import Doors, served_doors
from tests.support.fuse import Mount, afi_mount, needs_fuse
from tests.support.mcp import run, sdk
from tests.support.ssh import OPTS

NEEDLE = b"needle-29"
REGEX = {"regex": "needle-2[0-9]"}
MIB = 1 << 20
HAY = b"hay and straw, line %07d of the stack\n"


def _hay(size: int) -> bytearray:
    """Lines of hay, ``size`` bytes or a little more."""
    out = bytearray()
    number = 0
    while len(out) < size:
        out += HAY % number
        number += 1
    return out


def _files() -> dict[str, bytes]:
    """The workspace, by path under /files: big text files with needles past the first MiB (one on a
    line that crosses the first MiB, where the disk is read in pieces), binary files, a small one."""
    one = _hay(MIB + 1000) + b"the " + NEEDLE + b" is near the end\nlast\n"
    three = _hay(MIB - 10) + b"a line across the first MiB holds " + NEEDLE + b" too\n"
    three += _hay(3 * MIB) + b"and " + NEEDLE + b" again\n" + _hay(2000)
    binary = b"\x7fELF\x02\x01" + bytes(5000) + NEEDLE + b"\x00\xff\n" + bytes(range(256)) * 40
    return {
        "big/one-mib.log": bytes(one),
        "big/three-mib.log": bytes(three),
        "bin/tool.bin": binary,
        "bin/late-nul.bin": b"the " + NEEDLE + b" on a clean line\n" + bytes(10) + b"\n",  # binary all the same
        "bin/true.bin": Path(shutil.which("true") or "/bin/true").read_bytes(),
        "small.txt": b"a small file with the " + NEEDLE + b" in it\n",
    }


def _expected(files: dict[str, bytes], needle: bytes) -> list[tuple[str, int, int]]:
    """(path, line, column) of every line holding ``needle``, column in characters."""
    found = []
    for rel, data in sorted(files.items()):
        for number, line in enumerate(data.split(b"\n"), start=1):
            at = line.find(needle)
            if at >= 0:
                found.append((f"/files/{rel}", number, len(line[:at].decode("utf-8", "replace")) + 1))
    return found


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Doors]:
    with served_doors(tmp_path_factory.mktemp("search-big")) as doors:
        doors.put("/files/small.txt", _files()["small.txt"])
        for rel, data in _files().items():
            (doors.root / "default" / rel).parent.mkdir(parents=True, exist_ok=True)
            (doors.root / "default" / rel).write_bytes(data)  # on disk, as a user's tools put them there
        time.sleep(REFRESH_SECONDS + 0.1)  # the first write's refresh saw none of them yet
        yield doors


def _http_pages(doors: Doors, query: Any, path: str = "/files") -> list[dict[str, Any]]:
    pages, cursor = [], None
    while True:
        body = {"query": query, "path": path, "limit": 1000, **({"cursor": cursor} if cursor else {})}
        answer = httpx.post(f"{doors.http}/afi/search", json=body, headers=doors.auth, timeout=60)
        assert answer.status_code == 200, answer.text
        pages.append(answer.json())
        cursor = pages[-1].get("next_cursor")
        if not cursor:
            return pages


def _found(pages: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    return [(m["path"], m["line"], m["column"]) for page in pages for m in page["matches"]]


def _ssh(doors: Doors, command: str) -> subprocess.CompletedProcess[bytes]:
    cmd = ["ssh", "-p", str(doors.ssh_port), "-i", str(doors.ssh_key), *OPTS, "127.0.0.1", command]
    return subprocess.run(cmd, capture_output=True, timeout=300)


def _gnu(doors: Doors, args: list[str]) -> subprocess.CompletedProcess[bytes]:
    """GNU grep on the same files on disk (in a UTF-8 locale), its paths spelled as the tree's."""
    done = subprocess.run(["grep", *args], capture_output=True, cwd=doors.root / "default",
                          env={**os.environ, "LC_ALL": "C.UTF-8"}, timeout=60)  # fmt: skip
    return done


@pytest.mark.parametrize("query", [NEEDLE.decode(), REGEX], ids=["exact", "regex"])
def test_http_finds_the_needles_in_big_and_binary_files(served: Doors, query: Any) -> None:
    assert _found(_http_pages(served, query)) == _expected(_files(), NEEDLE)


def test_http_shows_a_binary_line_with_replacement_characters(served: Doors) -> None:
    (page,) = _http_pages(served, NEEDLE.decode(), "/files/bin/tool.bin")
    (match,) = page["matches"]
    assert match["text"].endswith(NEEDLE.decode() + "\x00\ufffd") and "x-truncated" not in page


def test_mcp_finds_the_needles(served: Doors) -> None:
    async def body() -> list[dict[str, Any]]:
        async with sdk(f"{served.http}/mcp", served.token) as client:
            pages, cursor = [], None
            while True:
                args = {"query": REGEX, "path": "/files", "limit": 1000, **({"cursor": cursor} if cursor else {})}
                result = await client.call_tool("afi.search", args)
                assert not result.is_error and result.structured_content is not None
                pages.append(result.structured_content)
                cursor = pages[-1].get("next_cursor")
                if not cursor:
                    return pages

    assert _found(run(body)) == _expected(_files(), NEEDLE)


def test_ssh_grep_prints_what_gnu_grep_prints(served: Doors) -> None:
    """-rn, -rl, -rc over the folder and -c, plain, -q on one binary file: the same stdout, the same
    ``binary file matches`` notes on stderr and the same exit status as GNU grep 3.8 on the disk."""
    for args in (["-rn", NEEDLE.decode(), "."], ["-rl", NEEDLE.decode(), "."], ["-rc", NEEDLE.decode(), "."],
                 ["-c", "ELF", "bin/true.bin"], ["ELF", "bin/true.bin"], ["-n", "ELF", "bin/tool.bin"],
                 ["-q", "ELF", "bin/true.bin"], ["-rE", "needle-2[0-9]", "bin"]):  # fmt: skip
        ours = _ssh(served, "cd /files; grep " + " ".join(args))
        gnu = _gnu(served, args)
        assert (ours.returncode, sorted(ours.stdout.splitlines())) == (gnu.returncode, sorted(gnu.stdout.splitlines()))
        assert sorted(ours.stderr.splitlines()) == sorted(gnu.stderr.splitlines()), args
    counted = _ssh(served, "grep -c ELF /files/bin/true.bin")
    assert counted.returncode == 0 and int(counted.stdout) >= 1  # was 0
    for rel, pattern in (("bin/true.bin", "ELF"), ("bin/late-nul.bin", NEEDLE.decode()), ("small.txt", "small")):
        piped = _ssh(served, f"cat /files/{rel} | grep {pattern}")
        with (served.root / "default" / rel).open("rb") as stdin:
            gnu = subprocess.run(
                ["grep", pattern], stdin=stdin, capture_output=True, env={**os.environ, "LC_ALL": "C.UTF-8"}
            )
        assert (piped.returncode, piped.stdout, piped.stderr) == (gnu.returncode, gnu.stdout, gnu.stderr)


@needs_fuse
def test_the_mounts_search_file_finds_the_needles(served: Doors) -> None:
    with _mounted(served) as mount:
        answer = _control_file(mount, {"query": NEEDLE.decode(), "path": "/files", "limit": 1000})
    assert [(m["path"], m["line"], m["column"]) for m in answer if "path" in m] == _expected(_files(), NEEDLE)


def test_a_file_past_one_pages_budget_is_searched_page_after_page(served: Doors) -> None:
    """300 MB (a sparse file: one line of NULs, the needle at its end) is over one page's 128 MiB:
    each door's first page says ``x-truncated`` (where it stopped, what is left) and a cursor; the
    cursors lead to the needle; the SSH grep and ``afi search`` follow them and find it."""
    size = 300_000_000
    huge = served.root / "default" / "huge" / "sparse.bin"
    huge.parent.mkdir()
    with huge.open("wb") as out:
        out.seek(size - 100)
        out.write(b"the " + NEEDLE + b" at the very end\n")
    try:
        time.sleep(REFRESH_SECONDS + 0.1)
        pages = _http_pages(served, NEEDLE.decode(), "/files/huge")
        assert _found(pages) == [("/files/huge/sparse.bin", 1, size - 100 + 5)]
        first = pages[0]
        assert first["matches"] == [] and first["next_cursor"]
        truncated = first["x-truncated"]
        assert truncated["path"] == "/files/huge/sparse.bin" and truncated["remaining"] == 1
        assert truncated["reason"] in ("bytes", "time") and 0 < truncated["offset"] < size and truncated["line"] == 0
        assert "x-truncated" not in pages[-1] and "next_cursor" not in pages[-1]

        async def mcp_page() -> dict[str, Any]:
            async with sdk(f"{served.http}/mcp", served.token) as client:
                result = await client.call_tool("afi.search", {"query": REGEX, "path": "/files/huge"})
                assert not result.is_error and result.structured_content is not None
                return result.structured_content

        mcp_first = run(mcp_page)
        assert mcp_first["matches"] == [] and mcp_first["x-truncated"]["path"] == "/files/huge/sparse.bin"

        counted = _ssh(served, "grep -c " + NEEDLE.decode() + " /files/huge/sparse.bin")
        assert (counted.returncode, counted.stdout) == (0, b"1\n"), counted.stderr
        cli = afi("search", NEEDLE.decode(), "--path", "/files/huge", db=served.db)
        assert (cli.returncode, cli.stdout.split(":")[:2]) == (0, ["/files/huge/sparse.bin", "1"]), cli.stderr

        plain = _ssh(served, "grep " + NEEDLE.decode() + " /files/huge/sparse.bin")
        assert (plain.returncode, plain.stdout) == (0, b"")
        assert plain.stderr == b"grep: /files/huge/sparse.bin: binary file matches\n"

        if os.path.exists("/dev/fuse"):
            with _mounted(served) as mount:
                answer = _control_file(mount, {"query": NEEDLE.decode(), "path": "/files/huge"})
            assert answer[-1]["x-truncated"]["path"] == "/files/huge/sparse.bin" and answer[-1]["next_cursor"]
    finally:
        huge.unlink()


def _mounted(doors: Doors) -> Any:
    key = doors.base / "writer.key"
    key.write_text(doors.token + "\n")
    return afi_mount(doors.base / "mnt", doors.db, doors.root, "--token", str(key))


def _control_file(mount: Mount, request: dict[str, Any]) -> list[dict[str, Any]]:
    fd = os.open(mount.path / ".afi" / "search", os.O_RDWR)
    try:
        os.write(fd, json.dumps(request).encode())
        answer = os.pread(fd, 1 << 20, 0).decode()
    finally:
        os.close(fd)
    assert answer.endswith("\n\n") or answer == "\n", answer
    return [json.loads(line) for line in answer.split("\n") if line]
