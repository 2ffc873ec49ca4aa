from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from afi.providers.memory import (
    MemoryFabric,
    MemoryScopeError,
    case_conclusions_not_procedures,
    create_memory,
    create_memory_fabric,
)
from afi.providers.memory.fabric.memory import Memory

A = "canary deploy checkout dashboard grafana board seven alpha"
B = "canary deploy checkout dashboard grafana board nine beta gamma delta"


class Session:
    def __init__(self, sid: str = "s1") -> None:
        self.id = sid

    def entries(self) -> list[Any]:
        return []


class Observational:
    def __init__(self, session: Session) -> None:
        self.session = session


@pytest.fixture
def memory(store_url: str) -> Iterator[Memory]:
    mem = create_memory(store_url, tenant_id="a", resource_id="b", thread_id="c")
    yield mem
    mem.close()


def _workers(memory: Memory, **kw: Any) -> MemoryFabric:
    return create_memory_fabric(memory, consolidate=False, linker=True, evolution=True, **kw)


def test_workers_run_only_while_attached(memory: Memory) -> None:
    fabric = _workers(memory)
    first = fabric.remember(kind="fact", content=A)
    unattached = fabric.remember(kind="fact", content=B, keywords=["deploys"], context="ops context")
    assert unattached.links == []
    assert fabric.get(first.id).keywords == []  # type: ignore[union-attr]
    attachment = fabric.attach(Session())
    assert fabric.attached and fabric.attached_session is attachment.session
    linked = fabric.remember(kind="fact", content=B + " epsilon", keywords=["rollout"], context="release context")
    assert {link.id for link in linked.links} >= {first.id}
    assert all(link.relation == "related" and 0 < (link.weight or 0) <= 1 for link in linked.links)
    weight = next(link.weight for link in linked.links if link.id == first.id)
    cosine = float(memory.embedder.embed([A])[0] @ memory.embedder.embed([B + " epsilon"])[0])
    assert weight == pytest.approx(cosine, abs=1e-3)  # the stored vector is at half precision
    neighbour = fabric.get(first.id)
    assert neighbour is not None and "rollout" in neighbour.keywords and neighbour.context == "release context"
    assert neighbour.content == A  # evolution never touches content
    attachment.detach()
    attachment.detach()
    assert not fabric.attached
    later = fabric.remember(kind="fact", content=B + " zeta")
    assert later.links == []


def test_passive_skips_workers(memory: Memory) -> None:
    fabric = _workers(memory, passive=True)
    first = fabric.remember(kind="fact", content=A)
    fabric.attach(Session())
    second = fabric.remember(kind="fact", content=B, keywords=["k"])
    assert second.links == [] and fabric.get(first.id).keywords == []  # type: ignore[union-attr]


def test_linker_top_k_bounds_links(memory: Memory) -> None:
    fabric = create_memory_fabric(memory, consolidate=False, linker={"top_k": 1})
    for i in range(4):
        fabric.remember(kind="fact", content=f"{A} n{i}")
    fabric.attach(Session())
    assert len(fabric.remember(kind="fact", content=A + " last").links) == 1


@pytest.mark.parametrize(
    "session",
    [
        pytest.param(object(), id="no-id"),
        pytest.param(type("S", (), {"id": "", "entries": lambda self: []})(), id="empty-id"),
        pytest.param(type("S", (), {"id": "x", "entries": None})(), id="entries-not-callable"),
    ],
)
def test_attach_refuses_non_sessions(memory: Memory, session: Any) -> None:
    fabric = create_memory_fabric(memory)
    with pytest.raises(MemoryScopeError):
        fabric.attach(session)
    assert not fabric.attached


def test_attach_requires_the_observational_session(memory: Memory) -> None:
    mine = Session("mine")
    fabric = create_memory_fabric(memory, observational=Observational(mine))
    with pytest.raises(MemoryScopeError, match="mine"):
        fabric.attach(Session("other"))
    assert fabric.attach(mine).session is mine


def test_context_provider_tags_blocks_and_filters_lineage(memory: Memory) -> None:
    fabric = create_memory_fabric(memory)
    fabric.remember(kind="working", block="core", content="Prefers terse output")
    kept = fabric.remember(kind="fact", content="user lives in lyon", source_entry_ids=["m1"])
    gone = fabric.remember(kind="fact", content="user lives in paris", source_entry_ids=["m2"])
    fabric.remember(kind="procedure", content="always lives in procedures")
    memory.revoke_source("m2", "revoked")
    provider = fabric.create_context_provider()
    blocks = provider.blocks()
    assert [b["type"] for b in blocks] == ["working-memory", "semantic-memory"]
    assert blocks[1]["id"] == kept.id
    by_query = fabric.create_context_provider(query="user lives", include_working=False).blocks()
    assert [b["id"] for b in by_query] == [kept.id]
    assert gone.id not in {b["id"] for b in provider.blocks("user lives")}
    attachment = fabric.attach(Session())
    assert attachment.context_provider.name == "memory-fabric"
    assert attachment.settings.linker.enabled is False


def test_case_conclusions_not_procedures(memory: Memory) -> None:
    fabric = create_memory_fabric(memory)
    fabric.remember(kind="fact", content="Checkout worker for case 4711 OOM'd at 03:12 after the retry cap doubled")
    fabric.remember(kind="procedure", content="Cap retry bursts before raising a worker memory limit")
    graded = fabric.recall("4711 03:12", kinds=["procedure"]).hits
    assert case_conclusions_not_procedures(graded, ["4711", "03:12"]) == 1.0
    fabric.remember(kind="procedure", content="Case 4711: raise the worker memory limit at 03:12")
    promoted = fabric.recall("4711 03:12", kinds=["procedure"]).hits
    assert len(promoted) == 2
    assert case_conclusions_not_procedures(promoted, ["4711", "03:12"]) == 0.0
    assert case_conclusions_not_procedures(fabric.notes(kinds=["fact", "procedure"])) == 0.0
    assert not any(h.kind == "procedure" for h in fabric.recall("4711 03:12").hits)
