"""What each engine cannot hold is refused as bad input, with nothing half-written, never a crash; and
on SQLite a verb on /files does not hold the store's write lock while its bytes go to disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from afi.errors import AfiError
from afi.provider import Caller
from afi.providers.memory.provider import MemoryProvider
from afi.providers.memory.workspace.workspace import Workspace

OWNER = Caller(principal="local", space="default")


def _code(call: Any) -> str:
    try:
        call()
    except AfiError as err:
        return err.code
    return "ok"


def test_nul_characters_are_refused_not_crashed_on_and_audited(store_url: str, tmp_path: Path) -> None:
    """12 writes carrying NUL where a path, a note, a tag or a source id may be: each answered with a
    refusal code (never an unexpected exception), nothing of it stored, every one audited."""
    provider = MemoryProvider(store_url, tmp_path / "files")
    fabric_fields: list[dict[str, Any]] = [
        {"kind": "fact", "content": "tagged", "tags": ["a\x00b"]},
        {"kind": "fact", "content": "sourced", "source_entry_ids": ["m\x00"]},
        {"kind": "fact", "content": "kw", "keywords": ["\x00"]},
    ]
    calls = [
        lambda: provider.write(OWNER, "/files/a\x00b.txt", b"x"),
        lambda: provider.write(OWNER, "/facts/nul\x00name.md", b"x"),
        lambda: provider.mkdir(OWNER, "/files/d\x00"),
        lambda: provider.delete(OWNER, "/files/\x00"),
        lambda: provider.move(OWNER, "/files/a\x00", "/files/b"),
        *[lambda f=f: provider.remember(OWNER, **f) for f in fabric_fields],
        lambda: provider.ledger_write(OWNER, "append", "s\x00", {"messages": [{"role": "user", "text": "t"}]}),
    ]
    codes = [_code(call) for call in calls]
    assert all(code in ("invalid_path", "unsupported", "not_found") for code in codes), codes
    text_with_nul = _code(lambda: provider.write(OWNER, "/facts/body.md", b"before\x00after"))
    content_with_nul = _code(lambda: provider.remember(OWNER, kind="fact", content="inside\x00text"))
    if store_url.startswith("postgresql"):  # PostgreSQL text cannot hold NUL: refused, nothing kept
        assert (text_with_nul, content_with_nul) == ("invalid_path", "invalid_path")
        assert _code(lambda: provider.read(OWNER, "/facts/body.md")) == "not_found"
    else:  # SQLite keeps it
        assert text_with_nul == "ok" and content_with_nul == "ok"
    rows = provider.audit_log(limit=50)
    assert len(rows) == len(calls) + 2
    assert any("\\x00" in row["path"] for row in rows)


def test_sqlite_file_bytes_go_to_disk_outside_the_store_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = MemoryProvider(tmp_path / "afi.db", tmp_path / "files")
    seen: list[bool] = []
    real = Workspace.write

    def spying(self: Workspace, *args: Any, **kw: Any) -> Any:
        seen.append(provider._db.in_transaction())
        return real(self, *args, **kw)

    monkeypatch.setattr(Workspace, "write", spying)
    provider.write(OWNER, "/files/big.bin", b"x" * 1024)
    provider.write(OWNER, "/facts/note.md", b"a note is one transaction with its audit row")
    assert seen == [False]
    assert provider.read(OWNER, "/files/big.bin").data == b"x" * 1024
