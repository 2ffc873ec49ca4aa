"""Sparse workspace files through HTTP: a write far past the end costs what it writes, not its offset.

A 1-byte write at offset 1e9 leaves a hole of a gigabyte. The server must not read that hole (its
kept version is a digest of the file's data, not of a gigabyte of zeros) and the space's quota must
not charge it (a file counts the bytes it has on disk, at most its size). Work is measured as the
bytes the server process read (``rchar`` in ``/proc/<pid>/io``), never as seconds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.servers import AfiServer, start_afi_serve

GIGA = 1_000_000_000
READ_BUDGET = 8 << 20  # a write's whole request: the store's pages, the file's few data blocks


def _read_bytes(server: AfiServer) -> int:
    """The bytes the server process has read so far (files, holes and the store alike)."""
    assert server.process is not None
    for line in Path(f"/proc/{server.process.pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/<pid>/io")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[AfiServer]:
    """A keyless server of its own (its process reads for these requests only)."""
    with start_afi_serve(tmp_path / "afi.db", tmp_path / "files") as running:
        yield running


@pytest.fixture
def small_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[AfiServer]:
    """A keyless server whose space may hold 4 MiB of files."""
    monkeypatch.setenv("AFI_SPACE_QUOTA", "4M")
    with start_afi_serve(tmp_path / "afi.db", tmp_path / "files") as running:
        yield running


def test_a_write_past_the_end_reads_nothing_of_the_hole(server: AfiServer) -> None:
    writes = [("/files/s.bin", GIGA, b"x"), ("/files/s.bin", GIGA // 2, b"y"), ("/files/s.bin", GIGA + 1, b"z"),
              ("/files/t.bin", 3 * GIGA // 4, b"t" * 5000)]  # fmt: skip
    cases, over = [], []
    with httpx.Client(base_url=server.url, timeout=120) as http:
        for path, offset, data in writes:
            before = _read_bytes(server)
            answer = http.put("/afi/write", params={"path": path, "offset": offset}, content=data)
            read = _read_bytes(server) - before
            cases.append((path, offset, answer.status_code, read))
            if answer.status_code != 200 or read > READ_BUDGET:
                over.append(cases[-1])
        assert over == [], f"{len(cases)} writes, {len(over)} over {READ_BUDGET:,} bytes read: {over}"
        assert http.get("/afi/stat", params={"path": "/files/s.bin"}).json()["size"] == GIGA + 2
        got = http.get("/afi/read", params={"path": "/files/s.bin", "offset": GIGA // 2 - 1, "length": 2})
        assert got.content == b"\x00y"
        assert http.get("/afi/read", params={"path": "/files/s.bin", "offset": GIGA, "length": 5}).content == b"xz"
        # every write kept a version, by its size and a digest; its bytes are not kept, and reading them says why
        versions = http.get("/afi/list", params={"path": "/history/files/s.bin"}).json()["entries"]
        assert [v["size"] for v in versions] == [GIGA + 1, GIGA + 1, GIGA + 2]
        assert len({v["attributes"]["x-sha256"] for v in versions}) == 3
        refused = http.get("/afi/read", params={"path": versions[0]["path"]})
        assert refused.status_code == 413 and "holes" in refused.json()["error"]["message"], refused.text


def test_holes_do_not_count_toward_the_quota(small_server: AfiServer) -> None:
    with httpx.Client(base_url=small_server.url, timeout=120) as http:
        written = [
            http.put("/afi/write", params={"path": f"/files/hole{i}.bin", "offset": GIGA}, content=b"x").status_code
            for i in range(12)
        ]
        assert written == [200] * 12, written  # 12 GB of apparent size in a 4 MiB quota: holes are free
        dense = http.put("/afi/write", params={"path": "/files/dense.bin"}, content=b"d" * (4 << 20))
        assert dense.status_code == 413 and "AFI_SPACE_QUOTA" in dense.json()["error"]["message"], dense.text
        filling = http.put("/afi/write", params={"path": "/files/hole0.bin", "offset": 4096}, content=b"f" * (4 << 20))
        assert filling.status_code == 413, filling.text  # writing data into a hole is charged
        assert http.get("/afi/stat", params={"path": "/files/dense.bin"}).status_code == 404
