from __future__ import annotations

import threading
from pathlib import Path

import pytest

from afi.providers.memory import (
    MemoryConflictError,
    MemoryLimitError,
    MemoryValidationError,
    create_memory,
    create_memory_fabric,
)


def test_blocks_live_under_fabric_blocks_and_forget_clears(tmp_path: Path) -> None:
    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c")
    fabric = create_memory_fabric(memory)
    note = fabric.remember(kind="working", block="core", content="Prefers terse output")
    value, version = memory.store.get_working(memory.scope)
    assert value["_fabric"]["blocks"]["core"]["content"] == "Prefers terse output"
    assert version == 1
    assert fabric.get(note.id) == fabric.blocks()["core"]
    result = fabric.forget(block="core")
    assert (result.block, result.deleted, result.held) == ("core", 1, False)
    assert fabric.blocks() == {}
    assert memory.store.get_working(memory.scope)[0]["_fabric"]["blocks"]["core"]["forgotten_at"]
    assert fabric.forget(block="core").deleted == 0
    again = fabric.append_block("core", "fresh start")
    assert again.content == "fresh start"
    with pytest.raises(MemoryValidationError):
        fabric.forget(block="core", hold=True)
    memory.close()


def test_append_is_capped_and_refusal_leaves_the_version(tmp_path: Path) -> None:
    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c",
                           limits={"max_entry_text_chars": 20})  # fmt: skip
    fabric = create_memory_fabric(memory)
    fabric.append_block("notes", "0123456789")
    assert fabric.append_block("notes", "abcdefghi").content == "0123456789\nabcdefghi"
    version = memory.store.get_working(memory.scope)[1]
    with pytest.raises(MemoryLimitError):
        fabric.append_block("notes", "x")
    assert memory.store.get_working(memory.scope)[1] == version
    assert fabric.blocks()["notes"].content == "0123456789\nabcdefghi"
    with pytest.raises(MemoryValidationError):
        fabric.append_block("Bad Label", "x")
    memory.close()


def test_stale_expected_version_is_a_conflict(tmp_path: Path) -> None:
    memory = create_memory(tmp_path / "m.db", tenant_id="a", resource_id="b", thread_id="c")
    fabric = create_memory_fabric(memory)
    fabric.append_block("log", "one")
    version = memory.store.get_working(memory.scope)[1]
    fabric.append_block("log", "two", expected_version=version)
    with pytest.raises(MemoryConflictError):
        fabric.append_block("log", "three", expected_version=version)
    assert fabric.blocks()["log"].content == "one\ntwo"
    memory.close()


def test_concurrent_appenders_on_two_connections_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    fabrics = [create_memory_fabric(create_memory(db, tenant_id="a", resource_id="b", thread_id="c")) for _ in range(2)]
    errors: list[BaseException] = []

    def writer(index: int) -> None:
        try:
            for i in range(40):
                fabrics[index].append_block("log", f"w{index}-{i}")
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    lines = fabrics[0].blocks()["log"].content.split("\n")
    assert sorted(lines) == sorted(f"w{w}-{i}" for w in range(2) for i in range(40))
    assert fabrics[1].memory.store.get_working(fabrics[1].memory.scope)[1] == 80
    for fabric in fabrics:
        fabric.memory.close()
