"""The observational ledger on each engine (a real SQLite file, then a real PostgreSQL database):
appends, observations, reflections, work scopes."""

from __future__ import annotations

import pytest

from afi.providers.memory import (
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryValidationError,
    create_ledger,
    create_memory,
    create_memory_fabric,
)
from afi.providers.memory.ledger.ledger import Ledger, LedgerSession


@pytest.fixture
def ledger(store_url: str) -> Ledger:
    return create_ledger(db=store_url)


@pytest.fixture
def session(ledger: Ledger) -> LedgerSession:
    s = ledger.session("s1")
    s.append(role="user", text="We roll out with a canary", entry_id="m1", timestamp="2026-01-01T00:00:00Z")
    s.append(role="assistant", text="Canary first, then everyone", entry_id="m2", timestamp="2026-01-01T00:01:00Z")
    return s


def _rows(ledger: Ledger) -> int:
    with ledger.database.read() as conn:
        return int(conn.execute("SELECT COUNT(*) FROM ledger_entries").fetchone()[0])


def test_session_is_get_or_create(ledger: Ledger, session: LedgerSession) -> None:
    again = ledger.session("s1")
    assert again.key == session.key and [e["id"] for e in again.entries()] == ["m1", "m2"]
    assert ledger.sessions() == ["s1"]
    assert ledger.find_session("nope") is None and ledger.sessions() == ["s1"]


def test_append_is_idempotent_by_entry_id_and_never_reorders(ledger: Ledger, session: LedgerSession) -> None:
    again = session.append(role="user", text="We roll out with a canary", entry_id="m1")
    assert again.position == 0 and again.timestamp == "2026-01-01T00:00:00.000Z"
    session.append(role="user", text="third", entry_id="m3")
    assert [e["id"] for e in session.entries()] == ["m1", "m2", "m3"]
    with pytest.raises(MemoryConflictError, match="other content"):
        session.append(role="user", text="something else", entry_id="m2")
    assert [e["text"] for e in session.entries()][1] == "Canary first, then everyone"


def test_append_many_is_all_or_nothing(ledger: Ledger, session: LedgerSession) -> None:
    before = _rows(ledger)
    good = {"role": "user", "text": "fine", "entry_id": "m9"}
    with pytest.raises(MemoryValidationError, match="role"):
        session.append_many([good, {"role": "robot", "text": "x", "entry_id": "m10"}])
    with pytest.raises(MemoryConflictError):
        session.append_many([good, {"role": "user", "text": "changed", "entry_id": "m1"}])
    with pytest.raises(MemoryValidationError, match="twice"):
        session.append_many([good, good])
    assert _rows(ledger) == before
    out = session.append_many([good, {"role": "assistant", "text": "done", "entry_id": "m10"}])
    assert [e.position for e in out] == [2, 3]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param({"role": "user", "text": "", "entry_id": "x"}, "non-empty", id="empty-text"),
        pytest.param({"role": "user", "text": "t", "entry_id": ""}, "entry_id", id="empty-id"),
        pytest.param({"role": "user", "text": "t", "entry_id": "x", "timestamp": "yesterday"}, "timestamp", id="time"),
        pytest.param({"role": "god", "text": "t", "entry_id": "x"}, "role", id="role"),
    ],
)
def test_bad_messages_are_refused(ledger: Ledger, session: LedgerSession, fields: dict[str, str], message: str) -> None:
    before = _rows(ledger)
    with pytest.raises(MemoryValidationError, match=message):
        session.append(**fields)
    assert _rows(ledger) == before


def test_observe_cites_messages_and_reflect_folds_keeping_ids(ledger: Ledger, session: LedgerSession) -> None:
    obs = session.observe(text="Team deploys via canary", source_entry_ids=["m1"])
    assert len(obs.id) == 20 and int(obs.id, 16) >= 0 and obs.source_entry_ids == ["m1"]
    with pytest.raises(MemoryValidationError, match="not messages"):
        session.observe(text="x", source_entry_ids=["nope"])
    refl = session.reflect(text="Always canary first", observation_ids=[obs.id])
    folded = session.observation(obs.id)
    assert folded is not None and folded.folded_into == [refl.id] and folded.content == "Team deploys via canary"
    assert refl.scope_id is None and refl.scope_closed is False
    with pytest.raises(MemoryNotFoundError):
        session.reflect(text="y", observation_ids=["ffffffffffff"])
    other = ledger.session("s2")
    assert other.observation(obs.id) is None  # one branch does not read another
    assert [o.id for o in ledger.observations()] == [obs.id]


def test_retried_om_entry_id_replays(session: LedgerSession) -> None:
    first = session.observe(text="a fact", source_entry_ids=["m1"], entry_id="o-1")
    again = session.observe(text="a fact", source_entry_ids=["m1"], entry_id="o-1")
    assert again.id == first.id
    assert len([e for e in session.entries() if e["type"] == "observation"]) == 1
    with pytest.raises(MemoryConflictError):
        session.observe(text="another fact", entry_id="o-1")


def test_scopes_open_bind_and_close(session: LedgerSession) -> None:
    obs = session.observe(text="Team deploys via canary", source_entry_ids=["m1"])
    scope = session.open_scope("deploy-incident")
    refl = session.reflect(text="Always canary first", observation_ids=[obs.id], scope_id=scope.id)
    assert refl.scope_id == scope.id and refl.scope_closed is False
    closed = session.close_scope(scope.id)
    assert closed.closed and session.close_scope(scope.id).closed_at == closed.closed_at
    found = session.reflection(refl.id)
    assert found is not None and found.scope_closed is True
    types = [e["type"] for e in session.entries()]
    assert types[-3:] == ["reflection", "om.scope.bound", "om.scope.close"]
    with pytest.raises(MemoryConflictError, match="closed"):
        session.bind(refl.id, scope.id)
    with pytest.raises(MemoryNotFoundError):
        session.close_scope("aaaaaaaaaaaa")


def test_attach_satisfies_the_fabric_and_promotes_only_closed_scopes(store_url: str) -> None:
    ledger = create_ledger(db=store_url)
    s = ledger.session("s1")
    s.append(role="user", text="We roll out with a canary", entry_id="m1")
    obs = s.observe(text="Team deploys via canary", source_entry_ids=["m1"])
    scope = s.open_scope("deploy-incident")
    refl = s.reflect(text="Always deploy via canary first", observation_ids=[obs.id], scope_id=scope.id)
    unbound = s.reflect(text="Canary is slow", observation_ids=[obs.id])
    memory = create_memory(store_url, tenant_id="a", resource_id="default", thread_id="t")
    fabric = create_memory_fabric(memory, observational=ledger.attach(s))
    with pytest.raises(MemoryValidationError, match="closed work scope"):
        fabric.remember(kind="procedure", reflection_id=refl.id)  # open scope only
    with pytest.raises(MemoryValidationError, match="closed work scope"):
        fabric.remember(kind="fact", reflection_id=unbound.id)
    with pytest.raises(MemoryNotFoundError):
        fabric.remember(kind="fact", reflection_id="aaaaaaaaaaaa")
    assert fabric.change_seq() == 0
    s.close_scope(scope.id)
    note = fabric.remember(kind="procedure", reflection_id=refl.id)
    assert note.content == "Always deploy via canary first"
    assert note.promoted_from is not None and note.promoted_from.model_dump() == {
        "reflection_id": refl.id, "scope_id": scope.id}  # fmt: skip
    episode = fabric.remember(kind="episode", id=obs.id)  # folded, still readable
    assert episode.content == "Team deploys via canary" and episode.source_entry_ids == ["m1"]
    with pytest.raises(MemoryNotFoundError):
        fabric.remember(kind="episode", id="bbbbbbbbbbbb")
    fabric.attach(s)  # the ledger session is the fabric's observational session
    memory.close()
