from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from afi.providers.memory import MemoryFabric, MemoryValidationError, create_memory, create_memory_fabric


@pytest.fixture
def fabric(store_url: str) -> Iterator[MemoryFabric]:
    memory = create_memory(store_url, tenant_id="acme", resource_id="user-1", thread_id="t1")
    yield create_memory_fabric(memory)
    memory.close()


def test_default_kinds_are_fact_and_file(fabric: MemoryFabric) -> None:
    fact = fabric.remember(kind="fact", content="canary rollout health on the deploy dashboard")
    proc = fabric.remember(kind="procedure", content="canary rollout first then widen")
    file = fabric.remember(kind="file", path="docs/canary.md", content="canary rollout notes")
    fabric.remember(kind="working", block="core", content="canary rollout")
    ids = [h.id for h in fabric.recall("canary rollout").hits]
    assert set(ids) == {fact.id, file.id}
    assert [h.id for h in fabric.recall("canary rollout", kinds=["procedure"]).hits] == [proc.id]
    assert fabric.recall("canary rollout", kinds=["working"]).hits == []
    for bad in ([], ["memo"], "fact"):
        with pytest.raises(MemoryValidationError):
            fabric.recall("canary", kinds=bad)


def test_as_of_valid_from_inclusive_valid_to_exclusive(fabric: MemoryFabric) -> None:
    note = fabric.remember(kind="fact", content="office in berlin",
                           valid_from="2026-01-01T00:00:00Z", valid_to="2026-02-01T00:00:00Z")  # fmt: skip
    found = lambda at: [h.id for h in fabric.recall("office berlin", as_of=at).hits]  # noqa: E731
    assert found("2026-01-01T00:00:00.000Z") == [note.id]
    assert found("2025-12-31T23:59:59.999Z") == []
    assert found("2026-01-31T23:59:59.999Z") == [note.id]
    assert found("2026-02-01T00:00:00.000Z") == []
    with pytest.raises(MemoryValidationError):
        fabric.recall("office", as_of="not a time")


def test_top_k_default_and_hard_cap(fabric: MemoryFabric) -> None:
    for i in range(40):
        fabric.remember(kind="fact", content=f"alpha note number {i} unique{i}", consolidate=False)
    assert len(fabric.recall("alpha note").hits) == 5
    assert len(fabric.recall("alpha note", top_k=100).hits) == 32
    with pytest.raises(MemoryValidationError):
        fabric.recall("alpha", top_k=0)


def test_scoring_blend_matches_the_formula(fabric: MemoryFabric) -> None:
    fabric.remember(kind="fact", content="metric units preferred", importance=0.2)
    fabric.remember(kind="fact", content="units of work tracked weekly", importance=0.9)
    plain = fabric.recall("metric units")
    assert plain.hits[0].similarity is None and plain.explain[0].similarity is None
    scoring = {"recency_weight": 0.3, "importance_weight": 0.2, "half_life_ms": 7 * 86_400_000}
    result = fabric.recall("metric units", scoring=scoring)
    for hit, row in zip(result.hits, result.explain, strict=True):
        assert hit.similarity is not None and hit.recency is not None and row.importance is not None
        assert 0.99 < hit.recency <= 1.0
        expected = hit.similarity * 0.5 + hit.recency * 0.3 + row.importance * 0.2
        assert hit.score == pytest.approx(expected)
        assert row.score == hit.score
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)
    over = fabric.recall("metric units", scoring={"recency_weight": 1, "importance_weight": 1, "half_life_ms": 1})
    assert all(h.score == pytest.approx(0.5 * h.recency + 0.5 * (e.importance or 0))  # type: ignore[operator]
               for h, e in zip(over.hits, over.explain, strict=True))  # fmt: skip
    with pytest.raises(MemoryValidationError, match="half_life_ms"):
        fabric.recall("metric", scoring={"recency_weight": 0.5})
    with pytest.raises(MemoryValidationError):
        fabric.recall("metric", scoring={"importance_weight": 2})


def test_recency_decays_by_half_life(fabric: MemoryFabric) -> None:
    note = fabric.remember(kind="fact", content="old meeting notes about budgets")
    day_ago = (datetime.now(UTC) - timedelta(days=1)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    with fabric.memory.store.write() as conn:
        conn.execute("UPDATE notes SET created_at = ? WHERE id = ?", (day_ago, note.id))
    result = fabric.recall("meeting budgets", scoring={"recency_weight": 0.5, "half_life_ms": 86_400_000})
    assert result.hits[0].recency == pytest.approx(0.5, abs=0.01)


def test_budget_keeps_best_hit_and_stops_at_first_misfit(fabric: MemoryFabric) -> None:
    fabric.remember(kind="fact", content="zebra " * 40, consolidate=False)
    fabric.remember(kind="fact", content="zebra stripes short", consolidate=False)
    fabric.remember(kind="fact", content="zebra crossing also short", consolidate=False)
    full = fabric.recall("zebra", top_k=3)
    assert len(full.hits) == 3
    tight = fabric.recall("zebra", top_k=3, budget=1)
    assert len(tight.hits) == 1 and tight.hits[0].id == full.hits[0].id
    running, expected = 0, []
    for hit in full.hits:
        if expected and running + hit.token_count > 12:
            break
        running += hit.token_count
        expected.append(hit.id)
    assert [h.id for h in fabric.recall("zebra", top_k=3, budget=12).hits] == expected
    with pytest.raises(MemoryValidationError):
        fabric.recall("zebra", budget=0)


def test_links_expand_one_hop_from_the_batch(fabric: MemoryFabric) -> None:
    target = fabric.remember(kind="fact", content="rollback procedure lives in the wiki runbook")
    seed = fabric.remember(kind="fact", content="canary deploy for checkout", links=[{"id": target.id}])
    result = fabric.recall("canary deploy checkout runbook", top_k=1)
    assert [h.id for h in result.hits] == [seed.id, target.id]
    assert [e.link for e in result.explain] == [False, True]


def test_query_text_is_never_echoed(fabric: MemoryFabric) -> None:
    fabric.remember(kind="fact", content="metric units preferred")
    result = fabric.recall("metric units zqxsecretword")
    assert result.hits
    assert "zqxsecretword" not in json.dumps(result.model_dump())


def test_hybrid_finds_rare_terms_the_hash_vector_misses(fabric: MemoryFabric) -> None:
    # many notes share the common words; only one carries the rare term. Lexical BM25 must surface it.
    for i in range(30):
        fabric.remember(kind="fact", content=f"the team talked about the weekly plan and the roadmap {i}",
                        consolidate=False)  # fmt: skip
    rare = fabric.remember(kind="fact", content="Zanzibar trip planned for the team in spring")
    query = "what did the team talk about for the weekly plan zanzibar"
    hybrid = [h.id for h in fabric.recall(query, top_k=3).hits]
    assert rare.id in hybrid
    lexical = [h.id for h in fabric.recall(query, top_k=1, scoring={"fusion": {"mode": "lexical"}}).hits]
    assert lexical == [rare.id]
    vector = fabric.recall(query, top_k=3, scoring={"fusion": {"mode": "vector"}})
    for hit, row in zip(vector.hits, vector.explain, strict=True):
        assert hit.score == pytest.approx(max(0.0, row.cosine or 0.0), abs=1e-6)
    with pytest.raises(MemoryValidationError):
        fabric.recall(query, scoring={"fusion": {"mode": "magic"}})


def test_redactor_applies_before_storing_and_on_hits(tmp_path: Path) -> None:
    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c",
                           redactor=lambda text: text.replace("hunter2", "[secret]"))  # fmt: skip
    fabric = create_memory_fabric(memory)
    note = fabric.remember(kind="fact", content="the wifi password is hunter2", context="hunter2 context")
    assert note.content == "the wifi password is [secret]" and note.context == "[secret] context"
    with memory.store.read() as conn:
        row = conn.execute("SELECT content, rendered FROM notes").fetchone()
    assert "hunter2" not in row[0] and "hunter2" not in row[1]
    hits = fabric.recall("wifi password").hits
    assert hits and "hunter2" not in hits[0].content
    memory.close()


def test_consent_never_widens_and_require_consent_filters(tmp_path: Path) -> None:
    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c", require_consent=True)
    fabric = create_memory_fabric(memory)
    granted = fabric.remember(kind="fact", content="likes green tea", consent={"source": "user", "visible": True})
    fabric.remember(kind="fact", content="likes black tea")  # no consent: hidden under require_consent
    hidden = fabric.remember(kind="fact", content="likes white tea", consent={"visible": False})
    assert granted.consent is not None and granted.consent["visible"] is True
    assert [h.id for h in fabric.recall("likes tea", top_k=10).hits] == [granted.id]
    named = fabric.remember(kind="fact", content="likes oolong", name="oolong", consent={"visible": False})
    again = fabric.remember(kind="fact", content="likes oolong", name="oolong", consent={"visible": True})
    assert again.id == named.id and again.consent is not None and again.consent["visible"] is False
    open_memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c")
    open_fabric = create_memory_fabric(open_memory)
    assert {hidden.id, named.id}.isdisjoint(h.id for h in open_fabric.recall("likes tea", top_k=10).hits)
    assert len(open_fabric.recall("likes tea", top_k=10).hits) == 2
    open_memory.close()
    memory.close()


def test_revoked_source_excludes_notes_from_recall(fabric: MemoryFabric) -> None:
    tainted = fabric.remember(kind="fact", content="user lives in paris", source_entry_ids=["m7"])
    clean = fabric.remember(kind="fact", content="user lives in lyon", source_entry_ids=["m8"])
    assert {h.id for h in fabric.recall("user lives").hits} == {tainted.id, clean.id}
    fabric.memory.revoke_source("m7", "corrected")
    assert [h.id for h in fabric.recall("user lives").hits] == [clean.id]
    with pytest.raises(MemoryValidationError):
        fabric.memory.revoke_source("m8", "bored")  # type: ignore[arg-type]


def test_forget_by_id_delete_and_hold(fabric: MemoryFabric) -> None:
    gone = fabric.remember(kind="fact", content="temporary fact one")
    held = fabric.remember(kind="fact", content="litigation fact two")
    result = fabric.forget(id=gone.id)
    assert (result.id, result.deleted, result.held) == (gone.id, 1, False)
    assert fabric.get(gone.id) is None
    result = fabric.forget(id=held.id, hold=True)
    assert (result.deleted, result.held) == (0, True)
    assert fabric.get(held.id) is None
    assert fabric.recall("litigation fact").hits == []
    with fabric.memory.store.read() as conn:
        row = conn.execute("SELECT status FROM notes WHERE id = ?", (held.id,)).fetchone()
    assert row == ("legal_hold",)
    assert fabric.forget(id="abcdefabcdef").deleted == 0
    with pytest.raises(MemoryValidationError):
        fabric.forget()
    with pytest.raises(MemoryValidationError):
        fabric.forget(id=held.id, block="core")


def test_another_process_write_is_seen_by_a_warm_cache(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    a = create_memory_fabric(create_memory(db, tenant_id="t", resource_id="r", thread_id="x"))
    b = create_memory_fabric(create_memory(db, tenant_id="t", resource_id="r", thread_id="x"))
    first = a.remember(kind="fact", content="first shared fact about kiwis")
    assert [h.id for h in b.recall("kiwis").hits] == [first.id]  # b's cache is now warm
    second = a.remember(kind="fact", content="second shared fact about kiwis", consolidate=False)
    assert {h.id for h in b.recall("kiwis").hits} == {first.id, second.id}
    a.forget(id=first.id)
    assert [h.id for h in b.recall("kiwis").hits] == [second.id]
    assert b.change_seq() == a.change_seq()
    a.memory.close()
    b.memory.close()


def test_sparse_postings_score_exactly_like_the_dense_matvec(tmp_path: Path) -> None:
    import numpy as np

    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c")
    fabric = create_memory_fabric(memory, consolidate=False)
    for i in range(60):
        fabric.remember(kind="fact", content=f"note {i} about topic{i % 7} and item{i % 11} with extra{i}")
    fabric.recall("topic3 item5")  # loads the index and builds the postings
    changed = fabric.remember(kind="fact", content="topic3 item5 arrived after the postings were built")
    index = memory.index
    with index.lock:
        index.refresh()
        assert index._sparse is not None and index._dirty
        query = memory.embedder.embed(["topic3 item5 extra12"])[0]
        dense = index.matrix[: index.size] @ query
        assert np.allclose(index._scores(query), dense, atol=1e-6)
    assert changed.id in {h.id for h in fabric.recall("topic3 item5 arrived").hits}
    memory.close()


def _mixed_notes(fabric: MemoryFabric, other: MemoryFabric) -> None:
    """Notes sharing their words that recall must and must not see: other kinds, ended and future
    validity, hidden consent, a revoked source, old versions, another scope."""
    for i in range(90):
        words = f"harbour lantern {['amber', 'cobalt', 'violet'][i % 3]} keeper{i % 7} entry{i}"
        shape = i % 9
        if shape == 0:
            fabric.remember(kind="procedure", content=f"{words} steps", consolidate=False)
        elif shape == 1:
            fabric.remember(kind="fact", content=words, valid_to="2020-01-01T00:00:00Z", consolidate=False)
        elif shape == 2:
            fabric.remember(kind="fact", content=words, valid_from="2999-01-01T00:00:00Z", consolidate=False)
        elif shape == 3:
            fabric.remember(kind="fact", content=words, consent={"visible": False}, consolidate=False)
        elif shape == 4:
            fabric.remember(kind="fact", content=words, source_entry_ids=[f"m{i}"], consolidate=False)
            fabric.memory.revoke_source(f"m{i}", "corrected")
        elif shape == 5:
            fabric.remember(kind="fact", content=words, name=f"named{i}")
            fabric.remember(kind="fact", content=f"{words} revised", name=f"named{i}")  # the first is an old version
        elif shape == 6:
            other.remember(kind="fact", content=words, consolidate=False)
        else:
            fabric.remember(kind="fact", content=words, consent={"visible": True}, consolidate=False)


@pytest.mark.parametrize("require_consent", [False, True])
def test_postgresql_rankings_filtered_in_sql_equal_those_filtered_in_the_process(
    pg_store_url: str, require_consent: bool
) -> None:
    from afi.providers.memory.fabric import recall as recall_module

    memory = create_memory(pg_store_url, tenant_id="a", resource_id="b", thread_id="c", require_consent=require_consent)
    other = create_memory(pg_store_url, tenant_id="a", resource_id="b", thread_id="other")
    fabric = create_memory_fabric(memory)
    _mixed_notes(fabric, create_memory_fabric(other))
    index = memory.index
    assert index.in_database
    queries = ["harbour lantern", "amber keeper3", "cobalt entry14 keeper5", "violet", "lantern keeper7 steps"]
    compared = found = 0
    for query in queries:
        for kinds in (["fact"], ["fact", "procedure"]):
            for window in (2, 5, 40):  # small windows: the mask drops most of the best matches
                asked = (query, kinds, 1.9e9, window, window, memory.fusion)
                in_sql, cosines_in_sql = recall_module._asked_of_database(memory, index, *asked)
                in_process, cosines_in_process = recall_module._asked_in_process(memory, index, *asked)
                assert in_sql.ranked == in_process.ranked, (query, kinds, window)  # both rankings, fused, lifted
                assert cosines_in_sql() == cosines_in_process(), (query, kinds, window)
                compared += 1
                found += bool(in_sql.ranked)
    assert (compared, found) == (30, 30)
    other.close()
    memory.close()


def test_a_failure_beside_the_recall_reaches_the_caller(store_url: str) -> None:
    """On PostgreSQL the query is embedded in a worker thread: what it raises is what recall raises, and
    the next recall works."""
    memory = create_memory(store_url, tenant_id="a", resource_id="b", thread_id="c")
    fabric = create_memory_fabric(memory)
    kept = fabric.remember(kind="fact", content="the lighthouse keeper logs the tides")
    embedder = memory.embedder

    class Broken:
        name, dims = embedder.name, getattr(embedder, "dims", 384)

        def embed(self, texts: Any) -> Any:
            raise RuntimeError("the model went away")

    memory.embedder = Broken()  # type: ignore[assignment]
    with pytest.raises(RuntimeError, match="the model went away"):
        fabric.recall("lighthouse keeper")
    memory.embedder = embedder
    for _ in range(12):  # more than the pool lends: no connection was kept by the failed recall
        assert [h.id for h in fabric.recall("lighthouse keeper").hits] == [kept.id]
    memory.close()


def test_a_recall_inside_a_transaction_sees_what_it_wrote(store_url: str) -> None:
    """Recall's parts that run beside it on PostgreSQL run in the caller's thread, on its connection, when
    the caller is inside a transaction: what the transaction wrote is found by every part."""
    memory = create_memory(store_url, tenant_id="a", resource_id="b", thread_id="c")
    fabric = create_memory_fabric(memory)
    for i in range(30):
        fabric.remember(kind="fact", content=f"ferry timetable entry {i} for the island", consolidate=False)
    with memory.store.write():
        written = fabric.remember(kind="fact", content="the ferry to the island leaves at dawn on sundays")
        found = fabric.recall("ferry island dawn sundays", top_k=3)
        assert found.hits[0].id == written.id
        assert found.explain[0].cosine > 0.3  # its vector read on the transaction's connection too
    memory.close()


@pytest.mark.parametrize("pool", ["2", "16"])
def test_concurrent_recalls_on_postgresql_beside_a_writer(
    pg_store_url: str, monkeypatch: pytest.MonkeyPatch, pool: str
) -> None:
    """Ten threads recall while one writes, each recall's parts on two connections at once: with a pool
    of two connections (every part waits its turn) and of sixteen, none fails, hangs or loses a topic."""
    import threading

    monkeypatch.setenv("AFI_PG_POOL", pool)
    memory = create_memory(pg_store_url, tenant_id="a", resource_id="b", thread_id="c")
    fabric = create_memory_fabric(memory)
    for i in range(60):
        fabric.remember(kind="fact", content=f"ledger entry {i} about topic{i % 6} and item{i}", consolidate=False)
    failures: list[BaseException] = []
    answered: list[bool] = []

    def reader(k: int) -> None:
        try:
            for j in range(15):
                topic = f"topic{(k + j) % 6}"
                hits = fabric.recall(f"{topic} ledger", top_k=5).hits
                answered.append(bool(hits) and topic in hits[0].content)
        except BaseException as error:  # reported below, with the figures
            failures.append(error)

    def writer() -> None:
        try:
            for i in range(40):
                fabric.remember(
                    kind="fact", content=f"later entry {i} about topic{i % 6} and piece{i}", consolidate=False
                )
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(10)] + [threading.Thread(target=writer)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a recall or the writer hung"
    assert (len(answered), sum(answered), failures) == (150, 150, []), (len(answered), sum(answered), failures)
    memory.close()
