"""The conformance kit through the mount (plain ``os`` calls): it passes, and it can fail."""

from __future__ import annotations

import errno
from collections.abc import Iterator

import pytest

from afi.clients.fs import CODES, FsClient
from afi.conformance import Report, run_kit
from afi.errors import ERRNO
from afi.model import Page
from tests.support.fuse import Mount, afi_mount, needs_fuse

pytestmark = needs_fuse


@pytest.fixture(scope="module")
def mounts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Mount, Mount]]:
    """Two mounts of one store with keys: a writer in space default, and a writer in space other."""
    from afi.auth.keys import KeyStore

    base = tmp_path_factory.mktemp("fuse-kit")
    db, root = base / "afi.db", base / "files"
    keys = KeyStore(db)
    for name, space in (("writer", "default"), ("other", "other")):
        (base / f"{name}.key").write_text(keys.create(space=space, scopes=("afi:write",), name=name)[1] + "\n")
    keys.close()
    with (
        afi_mount(base / "m-writer", db, root, "--token", str(base / "writer.key")) as writer,
        afi_mount(base / "m-other", db, root, "--token", str(base / "other.key")) as other,
    ):
        yield writer, other


def results(report: Report) -> dict[str, str]:
    return {o.id: o.result for o in report.outcomes}


def test_the_kit_passes_through_the_mount(mounts: tuple[Mount, Mount]) -> None:
    writer, other = mounts
    report = run_kit(FsClient(writer.path), other=FsClient(other.path))
    assert report.failures() == []
    outcome = results(report)
    assert outcome["setup"] == "pass" and outcome["cleanup"] == "pass"
    for must_run in ("cloak.stat", "cloak.list", "cloak.search", "cloak.write", "search.exact.paging", "move.conflict"):
        assert outcome[must_run] == "pass", must_run
    skipped = {o.id for o in report.outcomes if o.result == "skip"}
    # Only what a filesystem cannot say, or what this store does not declare, is skipped.
    assert skipped <= {
        "write.if_match",
        "list.bad_limit",
        "auth.missing",
        "auth.bad",
        "limits.rate",
        "verbs.unlisted_unsupported",
        "search.undeclared_mode",
    }, skipped
    assert report.count("pass") >= 70


class DropsFirstEntry(FsClient):
    """A broken filesystem client: every listing loses its first entry."""

    def list(self, path: str, *, limit: int = 1000, cursor: str | None = None, glob: str | None = None) -> Page:
        page = super().list(path, limit=limit, cursor=cursor, glob=glob)
        return Page(entries=page.entries[1:], next_cursor=page.next_cursor)


def test_the_kit_fails_a_broken_filesystem_client(mounts: tuple[Mount, Mount]) -> None:
    report = run_kit(DropsFirstEntry(mounts[0].path), only=["list."])
    assert {"list.sorted_direct", "list.paging"} <= {o.id for o in report.failures()}


@pytest.mark.parametrize("code", sorted(ERRNO), ids=str)
def test_every_errno_of_the_map_reads_back_as_its_code(code: str) -> None:
    back = CODES[ERRNO[code]]
    # EACCES stands for both; through a mount, credentials are checked once, at mount time.
    assert back == ("forbidden" if code == "unauthorized" else code)


def test_the_kernel_s_own_errnos_map_too() -> None:
    assert CODES[errno.EROFS] == "forbidden" and CODES[errno.ENOTEMPTY] == "conflict"
    assert CODES[errno.ENOTDIR] == "invalid_path" and CODES[errno.EISDIR] == "invalid_path"
