"""No answer of ``afi serve --ssh`` shows where its workspace lives on the host.

An error names a path in the tree (``/files/a.txt``), never the host's (``/srv/afi/files/default/a.txt``):
the host path tells a caller the server's layout and user, and means nothing at the door they use. A
hostile corpus (paths from ``tests/support/hostile.py``, and the workspace in states an operator or
another process can leave it in: the space's folder a symlink or a file, links, a FIFO, a file where
a folder is expected) goes through HTTP, the web page, MCP, the SSH shell and SFTP; no answer body,
stdout or stderr may hold the folder that holds the store and the workspace root.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncssh
import httpx
import pytest

from tests.support.hostile import HAND_PATHS, Tally
from tests.support.ssh import keygen, start_afi

PATHS = [
    "/files",
    "/files/a.txt",
    "/files/dir/b.txt",
    "/files/link/x",
    "/files/fifo",
    "/files/dangling",
    "/files/a.txt/x",
]
PATHS += [p for p in HAND_PATHS if p.startswith("/") and len(p) < 300]


@contextmanager
def served(base: Path) -> Iterator[tuple[str, int, asyncssh.SSHKey]]:
    key = keygen(base, "k")
    args = ["serve", "--ssh", "--port", "0", "--ssh-port", "0", "--db", str(base / "afi.db")]
    args += ["--root", str(base / "files")]
    with start_afi(args, base / "xdg", wait_for=2) as ports:
        yield f"http://127.0.0.1:{ports['http']}", ports["ssh"], asyncssh.read_private_key(str(key))


def _seed(url: str) -> None:
    """Put the workspace back to three files, whatever the last state's requests made of it."""
    for entry in httpx.get(url + "/afi/list", params={"path": "/files"}).json()["entries"]:
        gone = httpx.delete(url + "/afi/delete", params={"path": entry["path"], "recursive": "true"})
        assert gone.status_code == 200, gone.text
    for path, data in (("/files/a.txt", b"alpha"), ("/files/dir/b.txt", b"beta"), ("/facts/x.md", b"a fact")):
        put = httpx.put(url + "/afi/write", params={"path": path}, content=data)
        assert put.status_code == 200, put.text


def _states(space: Path) -> list[tuple[str, Callable[[], None], Callable[[], None]]]:
    """(name, make, undo) of workspace states an operator or another process can leave on disk."""
    kept = space.with_name("kept")

    def links() -> None:
        os.symlink("/etc", space / "link")
        os.symlink("nowhere", space / "dangling")
        os.mkfifo(space / "fifo")

    def unlink() -> None:
        for name in ("link", "dangling", "fifo", "moved"):  # a request may have moved or removed one
            if (space / name).is_symlink() or not (space / name).is_dir():
                (space / name).unlink(missing_ok=True)

    def space_link() -> None:
        space.rename(kept)
        os.symlink("kept", space)

    def space_file() -> None:
        space.rename(kept)
        space.write_text("a file where the space's folder was\n")

    def back() -> None:
        space.unlink()
        kept.rename(space)

    def dir_file() -> None:
        shutil.rmtree(space / "dir")
        (space / "dir").write_text("a file where a folder was\n")

    def file_dir() -> None:
        (space / "dir").unlink()
        (space / "dir").mkdir()
        (space / "dir" / "b.txt").write_bytes(b"beta")

    return [
        ("links, a FIFO", links, unlink),
        ("the space's folder is a symlink", space_link, back),
        ("the space's folder is a file", space_file, back),
        ("a file where a folder was", dir_file, file_dir),
    ]


def _http_cases(url: str) -> Iterator[tuple[str, httpx.Response]]:
    mcp_headers = {"Accept": "application/json, text/event-stream", "X-Mcp-Stateless": "true"}
    with httpx.Client(base_url=url, timeout=60) as http:
        for path in PATHS:
            q = {"path": path}
            yield f"stat {path}", http.get("/afi/stat", params=q)
            yield f"list {path}", http.get("/afi/list", params=q)
            yield f"read {path}", http.get("/afi/read", params=q)
            yield f"write {path}", http.put("/afi/write", params={"path": path + ".w"}, content=b"w")
            yield f"mkdir {path}", http.post("/afi/mkdir", json={"path": path + ".d", "parents": True})
            yield f"move {path}", http.post("/afi/move", json={"from": path, "to": "/files/moved"})
            yield f"delete {path}", http.delete("/afi/delete", params={"path": path + ".w"})
            yield f"search {path}", http.post("/afi/search", json={"query": "a", "path": path})
            yield f"web {path}", http.get("/ui/browse", params=q)
        for page in ("/audit", "/ui/audit", "/.afi/manifest.json", "/ui/search?q=alpha", "/ui/browse?path=/files"):
            yield f"page {page}", http.get(page)
        for tool, args in [
            ("afi.stat", {"path": "/files/a.txt"}),
            ("afi.list", {"path": "/files"}),
            ("afi.read", {"path": "/files/dir/b.txt"}),
            ("afi.write", {"path": "/files/mcp.txt", "data": "m"}),
            ("memory.view", {"path": "dir"}),
            ("memory.read", {"path": "a.txt"}),
            ("memory.insert", {"path": "dir/c.txt", "text": "c"}),
        ]:
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}}
            yield f"mcp {tool}", http.post("/mcp", json=call, headers=mcp_headers)


async def _ssh_cases(port: int, key: asyncssh.SSHKey) -> list[tuple[str, str]]:
    said: list[tuple[str, str]] = []
    async with asyncssh.connect(
        "127.0.0.1", port=port, client_keys=[key], known_hosts=None, username="t", keepalive_interval=0
    ) as conn:
        for line in ["ls -l /files", "cat /files/a.txt /files/dir/b.txt /files/link/x /files/fifo", "find /files",
                     "grep -r a /files", "echo s > /files/dir/s.txt", "mkdir -p /files/dir/e", "stat /files/dir",
                     "mv /files/a.txt /files/dir/a.txt", "rm -r /files/link", "wc -c /files/a.txt"]:  # fmt: skip
            done = await conn.run(line, timeout=60)
            said.append((f"ssh {line}", f"{done.stdout}{done.stderr}"))
        async with conn.start_sftp_client() as sftp:
            sftp_ops = [("listdir", "/files"), ("stat", "/files/dir"), ("stat", "/files/link/x"),
                        ("listdir", "/files/dir"), ("mkdir", "/files/dir/f"), ("remove", "/files/fifo")]  # fmt: skip
            for op, path in sftp_ops:
                try:
                    answer = str(await getattr(sftp, op)(path))
                except asyncssh.SFTPError as err:
                    answer = str(err.reason)
                said.append((f"sftp {op} {path}", answer))
            try:
                async with sftp.open("/files/dir/g.txt", "wb") as file:
                    await file.write(b"g")
                said.append(("sftp put", "ok"))
            except asyncssh.SFTPError as err:
                said.append(("sftp put", str(err.reason)))
    return said


def test_no_answer_shows_the_host_path_of_the_workspace(tmp_path: Path) -> None:
    base = tmp_path.resolve()
    hidden = str(base)
    tally = Tally("answers that could show the host path")
    with served(base) as (url, port, key):
        _seed(url)
        space = base / "files" / "default"
        for state, make, undo in [("as written", lambda: None, lambda: None), *_states(space)]:
            make()
            try:
                for name, response in _http_cases(url):
                    tally.tried += 1
                    if hidden in response.text or hidden in json.dumps(dict(response.headers)):
                        tally.fail(f"{state}: {name}", f"{response.status_code} {response.text[:300]!r}")
                for name, text in asyncio.run(_ssh_cases(port, key)):
                    tally.tried += 1
                    if hidden in text:
                        tally.fail(f"{state}: {name}", text[:300])
            finally:
                undo()
            _seed(url)
    print(tally.report())
    assert tally.tried >= 1000
    assert not tally.failures, tally.report()


@pytest.mark.parametrize("door", ["http", "ssh"])
def test_the_space_folder_refusal_names_it_in_the_tree(tmp_path: Path, door: str) -> None:
    base = tmp_path.resolve()
    with served(base) as (url, port, key):
        _seed(url)
        space = base / "files" / "default"
        space.rename(base / "files" / "kept")
        os.symlink("kept", space)
        if door == "http":
            said = httpx.get(url + "/afi/list", params={"path": "/files"}).json()["error"]["message"]
        else:
            said = "".join(text for _, text in asyncio.run(_ssh_cases(port, key))[:1])
    assert str(base) not in said
    assert "'default'" in said and "workspace root" in said, said
