"""The provider's many-note remember: afi:write, the jail, one audit row, all or nothing, on both engines."""

from __future__ import annotations

from typing import Any

import pytest

from afi.errors import Conflict, Forbidden, InvalidPath
from afi.provider import Caller

OWNER = Caller(principal="local", space="default")
READER = Caller(principal="reader", space="default", scopes=frozenset({"afi:read"}))


def test_a_batch_is_written_and_audited_once(provider: Any) -> None:
    notes = provider.remember_many(OWNER, [
        {"kind": "fact", "content": "the canary runs in region west", "name": "canary"},
        {"kind": "procedure", "content": "roll back with the deploy tool's undo command"},
    ])  # fmt: skip
    assert [note.kind for note in notes] == ["fact", "procedure"]
    assert provider.read(OWNER, "/facts/canary.md").data.endswith(b"\n---\nthe canary runs in region west\n")
    rows = [row for row in provider.audit_log(limit=10) if row["verb"].startswith("remember")]
    assert [(row["verb"], row["path"], row["result"]) for row in rows] == [("remember_many", "/", "ok")]


def test_a_reader_may_not_remember_a_batch(provider: Any) -> None:
    for notes in ([{"kind": "fact", "content": "nope"}], ({"kind": "fact", "content": "nope"},), []):
        with pytest.raises(Forbidden, match="afi:write"):
            provider.remember_many(READER, notes)
    assert provider.list(OWNER, "/facts").entries == []


def test_a_file_note_outside_the_jail_refuses_the_batch(provider: Any) -> None:
    with pytest.raises(InvalidPath, match=r"^notes\[1\]: "):
        provider.remember_many(OWNER, [
            {"kind": "fact", "content": "first"},
            {"kind": "file", "path": "../escape.txt", "content": "outside"},
        ])  # fmt: skip
    assert provider.list(OWNER, "/facts").entries == []
    refused = [row for row in provider.audit_log(limit=10) if row["verb"] == "remember_many"]
    assert [row["result"] for row in refused] == ["invalid_path"]


def test_a_refusal_while_writing_leaves_nothing(provider: Any) -> None:
    provider.remember(OWNER, kind="fact", content="the pager rota", name="pager")
    with pytest.raises(Conflict, match=r"^notes\[1\]: the fact name 'pager' is held"):
        provider.remember_many(OWNER, [
            {"kind": "fact", "content": "a new note", "name": "fresh"},
            {"kind": "fact", "content": "taken", "id": "0123456789ab", "name": "pager"},
        ])  # fmt: skip
    assert [entry.path for entry in provider.list(OWNER, "/facts").entries] == ["/facts/pager.md"]
