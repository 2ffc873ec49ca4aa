"""Idempotent durable writes: the receipt store on a real SQLite file, and write tools replaying over MCP."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from afi.auth.receipts import ReceiptStore, canonical_hash
from afi.clients.mcp import McpClient
from afi.errors import Conflict, InvalidPath
from afi.provider import Caller
from tests.support.clock import Clock
from tests.support.mcp import error_of, run, sdk
from tests.support.servers import AfiServer

ME = Caller("alice", "default")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def receipts(tmp_path: Path, clock: Clock) -> ReceiptStore:
    return ReceiptStore(tmp_path / "afi.db", clock=clock)


def test_the_canonical_hash_ignores_key_order_only() -> None:
    assert canonical_hash({"a": 1, "b": [1, 2]}) == canonical_hash({"b": [1, 2], "a": 1})
    assert canonical_hash({"a": 1}) != canonical_hash({"a": "1"})


def test_a_completed_receipt_replays_and_survives_a_restart(tmp_path: Path, receipts: ReceiptStore) -> None:
    claim = receipts.claim(ME, "afi.write", "k1", {"path": "/x"})
    assert claim.action == "run"
    finished, stored = receipts.finish(claim, result={"structured": {"n": 1}, "text": "t"}, failed=False)
    assert stored and finished.completed_at is not None
    again = ReceiptStore(tmp_path / "afi.db").claim(ME, "afi.write", "k1", {"path": "/x"})
    assert again.action == "replay" and again.result == {"structured": {"n": 1}, "text": "t"}
    assert again.execution_id == claim.execution_id
    assert again.describe(status="completed", stored=True)["replayed"] is True


def test_the_same_key_with_other_arguments_is_a_conflict(receipts: ReceiptStore) -> None:
    claim = receipts.claim(ME, "afi.write", "k", {"path": "/x"})
    receipts.finish(claim, result={}, failed=False)
    with pytest.raises(Conflict, match="other arguments"):
        receipts.claim(ME, "afi.write", "k", {"path": "/y"})
    assert receipts.claim(Caller("bob"), "afi.write", "k", {"path": "/y"}).action == "run"  # another principal
    assert receipts.claim(ME, "afi.move", "k", {"path": "/y"}).action == "run"  # another tool


def test_a_running_receipt_asks_to_retry_until_it_is_stale(receipts: ReceiptStore, clock: Clock) -> None:
    first = receipts.claim(ME, "afi.write", "k", {"path": "/x"})
    with pytest.raises(Conflict) as caught:
        receipts.claim(ME, "afi.write", "k", {"path": "/x"})
    assert caught.value.retry_after == 1.0 and "still running" in caught.value.message
    clock.now += 11 * 60
    taken = receipts.claim(ME, "afi.write", "k", {"path": "/x"})
    assert taken.action == "run" and taken.reclaimed and taken.execution_id != first.execution_id
    _, stored = receipts.finish(first, result={"late": True}, failed=False)
    assert not stored  # the stale run may not overwrite the reclaimed receipt
    assert receipts.status(ME, "afi.write", "k") == "running"


def test_failed_and_expired_receipts_are_reclaimed(receipts: ReceiptStore, clock: Clock) -> None:
    claim = receipts.claim(ME, "afi.write", "k", {"path": "/x"})
    receipts.finish(claim, result=None, failed=True)
    assert receipts.status(ME, "afi.write", "k") == "failed"
    retry = receipts.claim(ME, "afi.write", "k", {"path": "/x"})
    assert retry.action == "run" and retry.reclaimed
    receipts.finish(retry, result={"ok": 1}, failed=False)
    clock.now += 24 * 3600 + 1
    assert receipts.claim(ME, "afi.write", "k", {"path": "/other"}).action == "run"


@pytest.mark.parametrize("key", ["", "   ", "x" * 257, 7])
def test_a_bad_key_is_refused(receipts: ReceiptStore, key: Any) -> None:
    with pytest.raises(InvalidPath):
        receipts.claim(ME, "afi.write", key, {})


def test_a_write_with_a_key_runs_once_and_replays(afi_server: AfiServer) -> None:
    path = f"/files/mcp-idem-{secrets.token_hex(3)}.txt"
    key = secrets.token_hex(8)

    async def body() -> None:
        async with sdk(afi_server.url + "/mcp", afi_server.tokens["writer"]) as client:
            await client.call_tool("afi.write", {"path": path, "data": "base\n"})
            args = {"path": path, "data": "one line\n", "append": True}
            first = await client.call_tool("afi.write", args, meta={"idempotencyKey": key})
            durable = first.meta["durableExecution"]  # type: ignore[index]
            assert not first.is_error and durable["replayed"] is False and durable["stored"] is True
            second = await client.call_tool("afi.write", args, meta={"idempotencyKey": key})
            again = second.meta["durableExecution"]  # type: ignore[index]
            assert again["replayed"] is True and again["executionId"] == durable["executionId"]
            assert second.structured_content == first.structured_content
            read = await client.call_tool("afi.read", {"path": path})
            assert read.content[0].text == "base\none line\n"  # type: ignore[union-attr]  # appended once
            other = {**args, "data": "another line\n"}
            refused = error_of(await client.call_tool("afi.write", other, meta={"idempotencyKey": key}))
            assert refused["code"] == "conflict" and "other arguments" in refused["message"]
            plain = await client.call_tool("afi.write", other)
            assert plain.meta["durableExecution"]["reason"] == "no_idempotency_key"  # type: ignore[index]
            assert "durableExecution" not in (await client.call_tool("afi.stat", {"path": path})).meta or {}
            await client.call_tool("afi.delete", {"path": path})

    run(body)


def test_the_idempotency_key_header_works_too(afi_server: AfiServer) -> None:
    path = f"/files/mcp-idem-h-{secrets.token_hex(3)}.txt"
    headers = {"X-Mcp-Idempotency-Key": secrets.token_hex(8)}
    with McpClient.http(afi_server.url + "/mcp", afi_server.tokens["writer"]) as plain:
        plain.write(path, b"base", create_only=True)
    with McpClient.http(afi_server.url + "/mcp", afi_server.tokens["writer"], headers=headers) as client:
        client.write(path, b"+x", append=True)
        client.write(path, b"+x", append=True)
        assert client.read(path).data == b"base+x"
        client.call("delete", {"path": path}, meta={"idempotencyKey": "its-own-" + secrets.token_hex(4)})
        with pytest.raises(Exception) as caught:
            client.stat(path)
        assert getattr(caught.value, "code", None) == "not_found"


def test_a_refused_write_leaves_no_receipt_and_a_failed_one_can_be_retried(afi_server: AfiServer) -> None:
    from afi.auth.keys import KeyStore

    path = f"/files/mcp-idem-f-{secrets.token_hex(3)}.txt"
    key = secrets.token_hex(8)
    reader = KeyStore(afi_server.db).verify(afi_server.tokens["reader"])
    writer = KeyStore(afi_server.db).verify(afi_server.tokens["writer"])
    store = ReceiptStore(afi_server.db)

    async def body() -> None:
        url = afi_server.url + "/mcp"
        async with sdk(url, afi_server.tokens["reader"]) as client:
            refused = error_of(
                await client.call_tool("afi.write", {"path": path, "data": "x"}, meta={"idempotencyKey": key})
            )
            assert refused["code"] == "forbidden"
        assert store.status(reader, "afi.write", key) is None
        async with sdk(url, afi_server.tokens["writer"]) as client:
            args = {"path": path, "data": "x", "create_only": True}
            await client.call_tool("afi.write", {"path": path, "data": "first"})
            failed = await client.call_tool("afi.write", args, meta={"idempotencyKey": key})
            assert error_of(failed)["code"] == "conflict"
            assert failed.meta["durableExecution"]["status"] == "failed"  # type: ignore[index]
            assert store.status(writer, "afi.write", key) == "failed"
            await client.call_tool("afi.delete", {"path": path})
            retried = await client.call_tool("afi.write", args, meta={"idempotencyKey": key})
            assert not retried.is_error and retried.meta["durableExecution"]["reclaimed"] is True  # type: ignore[index]
            await client.call_tool("afi.delete", {"path": path})

    run(body)
