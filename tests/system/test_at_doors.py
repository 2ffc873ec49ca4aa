"""``/.afi/at/<instant>/`` through every door: what the agent believed on Monday, by ``cat`` on the
mount, ``grep`` over SSH, HTTP and MCP, on one served store (the README's SQLite default)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from afi.clients.mcp import McpClient
from tests.support.doors import Doors, instant, served_doors
from tests.support.fuse import afi_mount, needs_fuse
from tests.support.ssh import OPTS


@dataclass(frozen=True)
class Served(Doors):
    """The doors, and an instant between the two writes."""

    monday: str = ""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_doors(tmp_path_factory.mktemp("at-doors")) as doors:
        doors.put("/facts/deploy.md", b"We deploy with a zebra canary on Mondays")
        monday = instant()
        doors.put("/facts/deploy.md", b"We deploy blue-green with an okapi gate now")
        yield Served(**vars(doors), monday=monday)


def test_http_reads_and_searches_monday(served: Served) -> None:
    auth = {"Authorization": f"Bearer {served.token}"}
    at = f"/.afi/at/{served.monday}"
    read = httpx.get(f"{served.http}/afi/read", params={"path": f"{at}/facts/deploy.md"}, headers=auth)
    assert read.status_code == 200 and b"zebra canary" in read.content
    now = httpx.get(f"{served.http}/afi/read", params={"path": "/facts/deploy.md"}, headers=auth)
    assert b"okapi" in now.content
    found = httpx.post(f"{served.http}/afi/search", json={"query": "zebra", "path": at}, headers=auth).json()
    assert [m["path"] for m in found["matches"]] == [f"{at}/facts/deploy.md"]
    refused = httpx.put(f"{served.http}/afi/write", params={"path": f"{at}/facts/deploy.md"}, headers=auth,
                        content=b"rewrite the past")  # fmt: skip
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    bad = httpx.get(f"{served.http}/afi/stat", params={"path": "/.afi/at/30-11-2026"}, headers=auth)
    assert bad.status_code == 400 and "not an instant" in bad.json()["error"]["message"]
    unknown = httpx.get(f"{served.http}/afi/stat", params={"path": "/.afi/at/last-monday"}, headers=auth)
    assert unknown.status_code == 404 and "no snapshot named" in unknown.json()["error"]["message"]


def test_mcp_reads_monday(served: Served) -> None:
    with McpClient.http(served.http + "/mcp", served.token) as client:
        at = f"/.afi/at/{served.monday}"
        assert b"zebra canary" in client.read(f"{at}/facts/deploy.md").data
        assert [e.path for e in client.list(f"{at}/facts").entries] == [f"{at}/facts/deploy.md"]


def test_ssh_greps_monday(served: Served) -> None:
    cmd = ["ssh", "-p", str(served.ssh_port), "-i", str(served.ssh_key), *OPTS, "127.0.0.1"]
    at = f"/.afi/at/{served.monday}"
    done = subprocess.run([*cmd, f"grep -r zebra {at}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{at}/facts/deploy.md:We deploy with a zebra canary on Mondays"
    listed = subprocess.run([*cmd, f"ls {at}/facts"], capture_output=True, text=True, timeout=60)
    assert listed.stdout.split() == ["deploy.md"]


@needs_fuse
def test_the_mount_cats_monday(served: Served) -> None:
    (served.base / "writer.key").write_text(served.token + "\n")
    with afi_mount(served.base / "mnt", served.db, served.root, "--token", str(served.base / "writer.key")) as mount:
        at = Path(mount.path) / ".afi" / "at" / served.monday
        assert sorted(os.listdir(at)) == ["episodes", "facts", "files", "history", "procedures", "sessions"]
        assert "zebra canary" in (at / "facts" / "deploy.md").read_text()
        grep = subprocess.run(["grep", "-r", "zebra", str(at / "facts")], capture_output=True, text=True, timeout=60)
        assert grep.returncode == 0 and "deploy.md" in grep.stdout
        with pytest.raises(OSError):
            (at / "facts" / "deploy.md").write_text("rewrite the past")
        assert "okapi" in (Path(mount.path) / "facts" / "deploy.md").read_text()
