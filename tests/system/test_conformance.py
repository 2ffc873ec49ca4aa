"""The conformance kit: it passes against a real ``afi serve``, and it can fail."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from afi.auth.ratelimit import RateLimiter
from afi.bindings.http import create_app
from afi.clients import HttpClient, LocalClient
from afi.conformance import Report, run_kit, scenarios
from afi.errors import NotFound, Unauthorized, Unsupported
from afi.model import Entry, Manifest, Page, ReadResult, dump
from afi.paths import normalize
from afi.provider import Caller
from tests.support.servers import AfiServer, serve_app_in_thread


@pytest.fixture
def clients(afi_server: AfiServer) -> Iterator[dict[str, HttpClient]]:
    made = {
        "main": HttpClient(afi_server.url, afi_server.tokens["writer"]),
        "other": HttpClient(afi_server.url, afi_server.tokens["other"]),
        "anonymous": HttpClient(afi_server.url),
        "forged": HttpClient(afi_server.url, "afi_" + secrets.token_urlsafe(32)),
    }
    yield made
    for client in made.values():
        client.close()


def results(report: Report) -> dict[str, str]:
    return {o.id: o.result for o in report.outcomes}


def test_the_kit_has_at_least_50_scenarios_with_unique_ids() -> None:
    ids = [s.id for s in scenarios()]
    assert len(ids) >= 50
    assert len(set(ids)) == len(ids)
    assert ids[-1].startswith("limits."), "rate-limit bursts run last"


def test_the_kit_passes_against_a_real_server(clients: dict[str, HttpClient]) -> None:
    report = run_kit(clients["main"], other=clients["other"], anonymous=clients["anonymous"], forged=clients["forged"])
    assert report.failures() == []
    outcome = results(report)
    assert outcome["setup"] == "pass" and outcome["cleanup"] == "pass"
    for must_run in ("cloak.stat", "cloak.search", "auth.missing", "auth.bad", "search.semantic.threshold"):
        assert outcome[must_run] == "pass", must_run
    assert outcome["limits.rate"] == "skip"
    assert report.count("pass") >= 70


def test_the_kit_leaves_no_scratch_data_behind(clients: dict[str, HttpClient]) -> None:
    report = run_kit(clients["main"], only=["list.sorted"])
    assert report.ok
    files = [e.path for e in clients["main"].list("/files").entries]
    facts = [e.path for e in clients["main"].list("/facts").entries]
    assert not [p for p in files if "/.conformance-" in p]
    assert not [p for p in facts if "/conformance-" in p]


class DropsFirstListEntry(HttpClient):
    """A broken client: every listing loses its first entry."""

    def list(self, path: str, *, limit: int = 1000, cursor: str | None = None, glob: str | None = None) -> Page:
        page = super().list(path, limit=limit, cursor=cursor, glob=glob)
        return Page(entries=page.entries[1:], next_cursor=page.next_cursor)


def test_the_kit_fails_a_client_that_drops_list_entries(afi_server: AfiServer) -> None:
    with DropsFirstListEntry(afi_server.url, afi_server.tokens["writer"]) as broken:
        report = run_kit(broken, only=["list."])
    failed = {o.id for o in report.failures()}
    assert {"list.sorted_direct", "list.paging", "list.glob"} <= failed
    assert not report.ok


class HidesAsUnauthorized(HttpClient):
    """A broken client: it reports a hidden path as unauthorized, which leaks that it exists."""

    def stat(self, path: str) -> Any:
        try:
            return super().stat(path)
        except NotFound as err:
            raise Unauthorized(err.message) from None


def test_the_kit_fails_cloaking_that_says_unauthorized(afi_server: AfiServer, clients: dict[str, HttpClient]) -> None:
    with HidesAsUnauthorized(afi_server.url, afi_server.tokens["other"]) as leaky:
        report = run_kit(clients["main"], other=leaky, only=["cloak.stat", "cloak.read"])
    outcome = results(report)
    assert outcome["cloak.stat"] == "fail" and outcome["cloak.read"] == "pass"
    assert "expected not_found, got unauthorized" in report.failures()[0].detail


class ReadOnly:
    """A read-only AFI provider: the memory provider with the level-3 verbs removed (profile 2)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def manifest(self) -> Manifest:
        data = self.inner.manifest().model_dump(by_alias=True)
        data.update(profile=2, capabilities=["stat", "list", "read", "search"])
        return Manifest.model_validate(data)

    def _manifest_bytes(self) -> bytes:
        return json.dumps(dump(self.manifest())).encode()

    def stat(self, caller: Caller, path: str) -> Entry:
        entry: Entry = self.inner.stat(caller, path)
        if entry.path == "/.afi/manifest.json":
            return entry.model_copy(update={"size": len(self._manifest_bytes()), "etag": None})
        return entry

    def read(self, caller: Caller, path: str, *, offset: int = 0, length: int | None = None) -> ReadResult:
        if normalize(path) != "/.afi/manifest.json":
            result: ReadResult = self.inner.read(caller, path, offset=offset, length=length)
            return result
        data = self._manifest_bytes()
        end = len(data) if length is None else offset + length
        return ReadResult(data=data[offset:end], content_type="application/json", eof=end >= len(data))

    def __getattr__(self, name: str) -> Any:
        if name in ("write", "mkdir", "delete", "move"):

            def refuse(*args: Any, **kw: Any) -> Any:
                raise Unsupported(f"{name} is not offered by this read-only provider")

            return refuse
        return getattr(self.inner, name)


def _memory(tmp_path: Path) -> Any:
    from afi.providers.memory.provider import MemoryProvider

    return MemoryProvider(tmp_path / "afi.db", tmp_path / "files")


def test_omitted_verbs_are_checked_for_unsupported(tmp_path: Path) -> None:
    client = LocalClient(ReadOnly(_memory(tmp_path)), Caller("local"))
    report = run_kit(client, profile=2)
    outcome = results(report)
    assert report.failures() == []
    assert outcome["verbs.unlisted_unsupported"] == "pass"
    assert outcome["setup"] == "skip"
    assert outcome["write.read_only_area"] == "pass"  # ran as an `unsupported` probe
    assert outcome["read.whole"] == "skip"


def test_a_manifest_that_omits_a_verb_the_provider_still_answers_fails(tmp_path: Path) -> None:
    provider = ReadOnly(_memory(tmp_path))
    honest_manifest, provider.__dict__["manifest"] = provider.manifest, lambda: honest_manifest()
    leaky = LocalClient(provider, Caller("local"))
    leaky.write = LocalClient(provider.inner, Caller("local")).write  # type: ignore[method-assign]
    report = run_kit(leaky, profile=2, only=["verbs.unlisted"])
    assert results(report)["verbs.unlisted_unsupported"] == "fail"


def test_a_declared_rate_limit_is_checked(tmp_path: Path) -> None:
    app = create_app(_memory(tmp_path), rate_limit=RateLimiter(1.0, 5))
    with serve_app_in_thread(app) as url, HttpClient(url) as client:
        report = run_kit(client, only=["limits."])
    assert results(report)["limits.rate"] == "pass"
    assert results(report)["cleanup"] == "pass"


def test_the_profile_caps_what_is_checked(clients: dict[str, HttpClient]) -> None:
    report = run_kit(clients["main"], profile=1, only=["search.exact.order", "write.create", "read.whole"])
    outcome = results(report)
    assert outcome["search.exact.order"] == "skip" and outcome["write.create"] == "skip"
    assert outcome["read.whole"] == "pass"


def test_the_report_as_json(clients: dict[str, HttpClient]) -> None:
    data = run_kit(clients["main"], only=["stat."]).to_dict()
    assert data["ok"] is True and data["provider"].startswith("afi-memory")
    assert data["totals"]["fail"] == 0
    assert {o["id"] for o in data["outcomes"]} >= {"stat.root", "stat.file", "setup", "cleanup"}
