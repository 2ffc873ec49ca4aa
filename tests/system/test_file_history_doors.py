"""Workspace file history through every door on one served store: files written, overwritten, moved
and deleted over HTTP; ``cat`` and ``ls`` on the mount and ``grep -r`` over SSH under
``/.afi/at/<instant>/files`` and ``/history/files``; ``afi gc`` and ``afi diff`` from the command line."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.cli import afi
from tests.support.doors import Doors, instant, served_doors
from tests.support.fuse import afi_mount, needs_fuse
from tests.support.ssh import OPTS


@dataclass(frozen=True)
class Served(Doors):
    """The doors, and two instants between the writes."""

    monday: str = ""
    tuesday: str = ""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_doors(tmp_path_factory.mktemp("file-history-doors")) as doors:
        doors.put("/files/plans/todo.txt", b"feed the zebra at noon\n")
        doors.put("/files/plans/budget.txt", b"one hundred okapis\n")
        monday = instant()
        doors.put("/files/plans/todo.txt", b"feed the heron at dusk\n")
        httpx.post(f"{doors.http}/afi/move", json={"from": "/files/plans/budget.txt", "to": "/files/budget.txt"},
                   headers=doors.auth).raise_for_status()  # fmt: skip
        tuesday = instant()
        httpx.delete(f"{doors.http}/afi/delete", params={"path": "/files/budget.txt"},
                     headers=doors.auth).raise_for_status()  # fmt: skip
        yield Served(**vars(doors), monday=monday, tuesday=tuesday)


def test_http_reads_and_refuses_the_past(served: Served) -> None:
    auth = {"Authorization": f"Bearer {served.token}"}
    at = f"/.afi/at/{served.monday}/files"
    read = httpx.get(f"{served.http}/afi/read", params={"path": f"{at}/plans/todo.txt"}, headers=auth)
    assert read.status_code == 200 and read.content == b"feed the zebra at noon\n"
    listed = httpx.get(f"{served.http}/afi/list", params={"path": f"/.afi/at/{served.tuesday}/files"}, headers=auth)
    assert [e["path"].rsplit("/", 1)[1] for e in listed.json()["entries"]] == ["budget.txt", "plans"]
    for path in (f"{at}/plans/todo.txt", "/history/files/plans/todo.txt/2026-01-01T00:00:00.000Z"):
        refused = httpx.put(f"{served.http}/afi/write", params={"path": path}, headers=auth, content=b"x")
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"


def test_ssh_greps_the_past(served: Served) -> None:
    cmd = ["ssh", "-p", str(served.ssh_port), "-i", str(served.ssh_key), *OPTS, "127.0.0.1"]
    at = f"/.afi/at/{served.monday}/files"
    done = subprocess.run([*cmd, f"grep -r zebra {at}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{at}/plans/todo.txt:feed the zebra at noon"
    kept = subprocess.run([*cmd, "grep -r okapis /history/files"], capture_output=True, text=True, timeout=60)
    assert kept.returncode == 0, kept.stderr
    paths = sorted(line.split(":", 1)[0].rsplit("/", 2)[1] for line in kept.stdout.splitlines())
    assert paths == ["budget.txt", "budget.txt"]  # where it was written, and where it was moved


@needs_fuse
def test_the_mount_lists_and_cats_the_past(served: Served) -> None:
    (served.base / "writer.key").write_text(served.token + "\n")
    with afi_mount(served.base / "mnt", served.db, served.base / "files", "--token",
                   str(served.base / "writer.key")) as mount:  # fmt: skip
        at = Path(mount.path) / ".afi" / "at" / served.monday / "files"
        assert sorted(os.listdir(at)) == ["plans"]
        assert sorted(os.listdir(at / "plans")) == ["budget.txt", "todo.txt"]
        assert (at / "plans" / "todo.txt").read_text() == "feed the zebra at noon\n"
        versions = sorted(os.listdir(Path(mount.path) / "history" / "files" / "plans" / "todo.txt"))
        assert len(versions) == 2
        with pytest.raises(OSError):
            (at / "plans" / "todo.txt").write_text("rewrite the past")


def test_cli_diff_lists_files_and_gc_refuses_a_negative_count(served: Served) -> None:
    env = {"AFI_TOKEN": served.token}
    diff = afi("diff", served.monday, served.tuesday, "--json", db=served.db, env=env)
    assert diff.returncode == 1, diff.stderr  # as diff(1): something changed
    files = json.loads(diff.stdout)["files"]
    assert [c["path"] for c in files["added"]] == ["/files/budget.txt"]
    assert [c["path"] for c in files["changed"]] == ["/files/plans/todo.txt"]
    assert [c["path"] for c in files["deleted"]] == ["/files/plans/budget.txt"]
    text = afi("diff", served.monday, served.tuesday, db=served.db, env=env)
    assert "~ /files/plans/todo.txt" in text.stdout and "- /files/plans/budget.txt" in text.stdout
    refused = afi("gc", "--keep-days", "-1", db=served.db, env=env)
    assert refused.returncode == 2 and "--keep-days must be 0 or more days" in refused.stderr
    done = afi("gc", "--keep-days", "30", "--json", db=served.db, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["file_versions"] == 0 and report["spaces"] == ["default"]
