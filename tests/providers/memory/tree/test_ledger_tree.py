"""The ledger in the tree: /sessions and /episodes (read-only), grep over them, x-conversation, writes;
on each store engine."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from afi.errors import Forbidden, InvalidPath, NotFound
from afi.model import ConversationQuery, RegexQuery, SearchRequest, SemanticQuery
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider

OWNER = Caller(principal="local", space="default")
READER = Caller(principal="r", space="default", scopes=frozenset({"afi:read"}))


@pytest.fixture
def provider(provider: MemoryProvider) -> Iterator[MemoryProvider]:
    """The shared provider (each engine in turn), holding one conversation."""
    p = provider
    p.ledger_write(OWNER, "append", "s1", {"messages": [
        {"role": "user", "text": "We roll out with a canary", "entry_id": "m1", "timestamp": "2026-01-01T00:00:00Z"},
        {"role": "assistant", "text": "Canary first, then\nthe fleet", "entry_id": "m2",
         "timestamp": "2026-01-01T00:01:00Z"},
    ]})  # fmt: skip
    yield p


def _obs(provider: MemoryProvider) -> str:
    result = provider.ledger_write(
        OWNER, "observe", "s1", {"text": "Team deploys via canary", "source_entry_ids": ["m1"]}
    )
    return str(result["observation"]["id"])


def test_sessions_and_episodes_are_listed_and_readable(provider: MemoryProvider) -> None:
    obs_id = _obs(provider)
    assert [e.path for e in provider.list(OWNER, "/sessions").entries] == ["/sessions/s1.md"]
    assert [e.path for e in provider.list(OWNER, "/episodes").entries] == [f"/episodes/{obs_id}.md"]
    text = provider.read(OWNER, "/sessions/s1.md").data.decode()
    lines = text.splitlines()
    assert lines[2] == "[m1] (2026-01-01T00:00:00.000Z) user: We roll out with a canary"
    assert lines[4].startswith(f"> observation {obs_id}")
    entry = provider.stat(OWNER, "/sessions/s1.md")
    assert entry.size == len(text.encode()) and entry.attributes["permissions"] == "r"
    episode = provider.read(OWNER, f"/episodes/{obs_id}.md").data.decode()
    assert "kind: episode" in episode and episode.rstrip().endswith("Team deploys via canary")
    with pytest.raises(NotFound):
        provider.read(OWNER, "/sessions/nope.md")
    with pytest.raises(NotFound):
        provider.stat(OWNER, "/episodes/ffffffffffff.md")


@pytest.mark.parametrize("path", ["/sessions/s1.md", "/sessions/new.md", "/episodes/aaaaaaaaaaaa.md"])
def test_ledger_views_are_read_only(provider: MemoryProvider, path: str) -> None:
    before = provider.read(OWNER, "/sessions/s1.md").data
    with pytest.raises(Forbidden):
        provider.write(OWNER, path, b"rewritten")
    with pytest.raises(Forbidden):
        provider.delete(OWNER, path)
    assert provider.read(OWNER, "/sessions/s1.md").data == before


def test_grep_finds_what_was_said(provider: MemoryProvider) -> None:
    obs_id = _obs(provider)
    found = provider.search(OWNER, SearchRequest(query="canary", path="/"))
    paths = {(m.path, m.line) for m in found.matches}
    # exact search is case-sensitive: "Canary" on line 4 is not "canary"; line 5 is the observation
    assert {line for path, line in paths if path == "/sessions/s1.md"} == {3, 5}
    assert any(p == f"/episodes/{obs_id}.md" for p, _ in paths)
    regex = provider.search(OWNER, SearchRequest(query=RegexQuery(regex="then the fleet"), path="/sessions"))
    assert [(m.path, m.line) for m in regex.matches] == [("/sessions/s1.md", 4)]


def test_x_conversation_search(provider: MemoryProvider) -> None:
    query = ConversationQuery(conversation="canary fleet", session="s1", page_limit=2)
    page = provider.search(READER, SearchRequest(query=query, limit=5))
    assert [(m.x_id, m.score, m.line) for m in page.matches] == [("m2", 1.0, 4), ("m1", 0.5, 3)]
    explain = page.matches[0].x_explain or {}
    assert [e["id"] for e in explain["page"]["entries"]] == ["m1", "m2"] and explain["scanned"] == 2
    wire = SearchRequest.model_validate({"query": {"conversation": "canary", "session": "s1"}})
    assert isinstance(wire.query, ConversationQuery)
    with pytest.raises(NotFound):
        provider.search(OWNER, SearchRequest(query=ConversationQuery(conversation="x y", session="zz")))
    with pytest.raises(InvalidPath, match="limit"):
        provider.search(OWNER, SearchRequest(query=ConversationQuery(conversation="canary", session="s1",
                                                                     page_limit=101)))  # fmt: skip


def test_semantic_search_returns_episodes_under_their_path(provider: MemoryProvider) -> None:
    obs_id = _obs(provider)
    tree = provider.search(OWNER, SearchRequest(query=SemanticQuery(semantic="deploys via canary")))
    assert f"/episodes/{obs_id}.md" in [m.path for m in tree.matches]  # a search of / covers every area
    facts = provider.search(OWNER, SearchRequest(query=SemanticQuery(semantic="deploys via canary"), path="/facts"))
    assert all(not m.path.startswith("/episodes/") for m in facts.matches)
    asked = provider.search(OWNER, SearchRequest(query=SemanticQuery(semantic="deploys via canary"), path="/episodes"))
    assert [m.path for m in asked.matches] == [f"/episodes/{obs_id}.md"] and (asked.matches[0].score or 0) > 0
    kinds = SearchRequest.model_validate({"query": {"semantic": "deploys via canary"}, "x-kinds": ["fact", "episode"]})
    assert f"/episodes/{obs_id}.md" in [m.path for m in provider.search(OWNER, kinds).matches]


def test_ledger_writes_need_write_scope_and_are_audited(provider: MemoryProvider) -> None:
    before = provider.read(OWNER, "/sessions/s1.md").data
    with pytest.raises(Forbidden):
        provider.ledger_write(READER, "append", "s1", {"messages": [{"role": "user", "text": "x", "entry_id": "m9"}]})
    with pytest.raises(Exception, match="unknown ledger operation"):
        provider.ledger_write(OWNER, "rewrite", "s1", {})
    with pytest.raises(Exception, match="unknown field"):
        provider.ledger_write(OWNER, "observe", "s1", {"text": "x", "colour": "red"})
    assert provider.read(OWNER, "/sessions/s1.md").data == before
    verbs = [(row["verb"], row["result"]) for row in provider.audit_log(limit=3)]
    assert verbs == [("ledger.observe", "invalid_path"), ("ledger.rewrite", "invalid_path"),
                     ("ledger.append", "forbidden")]  # fmt: skip


def test_the_ledger_at_an_instant_is_its_entries_stamped_by_then(provider: MemoryProvider) -> None:
    provider.ledger_write(OWNER, "append", "s2", {"messages": [
        {"role": "user", "text": "A later session: heron", "entry_id": "n1", "timestamp": "2026-03-01T00:00:00Z"},
    ]})  # fmt: skip
    obs_id = _obs(provider)  # stamped now
    between = "/.afi/at/2026-01-01T00:00:30Z"
    assert [e.path for e in provider.list(OWNER, f"{between}/sessions").entries] == [f"{between}/sessions/s1.md"]
    text = provider.read(OWNER, f"{between}/sessions/s1.md").data.decode()
    assert "[m1]" in text and "[m2]" not in text, "only the entries stamped by then"
    assert provider.stat(OWNER, f"{between}/sessions/s1.md").attributes["permissions"] == "r"
    with pytest.raises(NotFound, match="at that instant"):
        provider.read(OWNER, f"{between}/sessions/s2.md")
    assert provider.list(OWNER, f"{between}/episodes").entries == []
    later = "/.afi/at/2026-06-01"
    assert [e.path.rsplit("/", 1)[1] for e in provider.list(OWNER, f"{later}/sessions").entries] == ["s1.md", "s2.md"]
    assert "[m2]" in provider.read(OWNER, f"{later}/sessions/s1.md").data.decode()
    assert provider.list(OWNER, f"{later}/episodes").entries == [], "the observation was made today"
    time.sleep(1.1)
    now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    assert [e.path.rsplit("/", 1)[1] for e in provider.list(OWNER, f"/.afi/at/{now}/episodes").entries] == [
        f"{obs_id}.md"
    ]
    hits = provider.search(OWNER, SearchRequest(path=between, query="canary")).matches
    assert [m.path for m in hits] == [f"{between}/sessions/s1.md"]
    assert provider.search(OWNER, SearchRequest(path=between, query="heron")).matches == []
    with pytest.raises(Forbidden):
        provider.write(OWNER, f"{between}/sessions/s1.md", b"rewritten")
