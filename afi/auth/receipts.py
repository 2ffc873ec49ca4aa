"""Idempotency receipts for durable writes (docs/afi.md, "Idempotent writes").

A write called with an idempotency key first *claims* a receipt bound to (principal, space, tool,
key) and a SHA-256 of the canonical arguments, in the store's SQLite file, for 24 hours:

- no receipt, or a failed, expired or stale-running one: the call is claimed and runs;
- a completed receipt with the same arguments: its stored result is replayed, nothing runs again;
- the same key with other arguments: refused with ``conflict``;
- a receipt still running: refused with ``conflict`` and ``retry_after`` (come back later).

Any binding (MCP today, HTTP tomorrow) uses the same store, so this lives in the core.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import Conflict, InvalidPath
from ..model import rfc3339
from ..provider import Caller
from ..sqlite import Connections
from ..storage import ensure_schema

__all__ = [
    "RECEIPT_TTL_SECONDS",
    "STALE_RUNNING_SECONDS",
    "Claim",
    "ReceiptStore",
    "canonical_hash",
    "no_key",
]

RECEIPT_TTL_SECONDS = 24 * 3600
STALE_RUNNING_SECONDS = 10 * 60
MAX_KEY_LENGTH = 256
ENGINE = "afi-idempotency-store"
_BUSY_TIMEOUT_MS = 5000


Status = Literal["running", "completed", "failed"]


def canonical_hash(arguments: Any) -> str:
    """Given JSON-able arguments, return the SHA-256 hex of their canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Claim:
    """What claiming a receipt decided: ``run`` (the caller runs the tool) or ``replay`` (``result`` is stored)."""

    action: Literal["run", "replay"]
    execution_id: str
    started_at: float
    result: dict[str, Any] | None = None
    completed_at: float | None = None
    reclaimed: bool = False

    def describe(self, *, status: Status, stored: bool) -> dict[str, Any]:
        """Return the ``_meta.durableExecution`` object for this claim after it ended with ``status``."""
        info: dict[str, Any] = {
            "engine": ENGINE,
            "executionId": self.execution_id,
            "status": status,
            "deduplicated": self.action == "replay",
            "replayed": self.action == "replay",
            "stored": stored,
            "startedAt": rfc3339(self.started_at),
        }
        if self.completed_at is not None:
            info["completedAt"] = rfc3339(self.completed_at)
        if self.reclaimed:
            info["reclaimed"] = True
        return info


def no_key() -> dict[str, Any]:
    """Return the ``_meta.durableExecution`` of a write called without an idempotency key."""
    return {"engine": ENGINE, "deduplicated": False, "stored": False, "reason": "no_idempotency_key"}


class ReceiptStore:
    """Receipts in the ``afi_receipts`` table of one SQLite file (WAL, busy timeout, one connection per thread).

    Args:
        db: the store file (the same one the provider uses).
        ttl: seconds a receipt is honoured.
        stale_after: seconds after which a receipt still ``running`` may be reclaimed.
        clock: seconds since the epoch (tests move time with it).
    """

    def __init__(
        self,
        db: str | Path,
        *,
        ttl: float = RECEIPT_TTL_SECONDS,
        stale_after: float = STALE_RUNNING_SECONDS,
        clock: Any = time.time,
    ) -> None:
        self.db = str(db)
        self.ttl = ttl
        self.stale_after = stale_after
        self._clock = clock
        self._db = Connections(db, busy_timeout_ms=_BUSY_TIMEOUT_MS)
        ensure_schema(self._conn())

    def _conn(self) -> sqlite3.Connection:
        return self._db.get()

    def claim(self, caller: Caller, tool: str, key: str, arguments: Any) -> Claim:
        """Given who calls which tool with which key and arguments, claim a receipt or find one to replay.

        Raises:
            InvalidPath: the key is empty, too long, or not a string.
            Conflict: the key was used with other arguments, or its call is still running (``retry_after``).
        """
        if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_LENGTH:
            raise InvalidPath(f"an idempotency key is a non-empty string of at most {MAX_KEY_LENGTH} characters")
        digest = canonical_hash(arguments)
        now = self._clock()
        ident = (caller.principal, caller.space, tool, key)
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                "SELECT args_sha256, execution_id, status, result, started_at, completed_at FROM afi_receipts "
                "WHERE principal=? AND space=? AND tool=? AND key=?",
                ident,
            ).fetchone()
            claim = self._decide(conn, ident, digest, now, row)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return claim

    def _decide(self, conn: sqlite3.Connection, ident: tuple[str, ...], digest: str, now: float, row: Any) -> Claim:
        if row is not None:
            args_sha, execution_id, status, result, started_at, completed_at = row
            live = now - started_at < self.ttl
            if live and status == "completed":
                if args_sha != digest:
                    raise Conflict("this idempotency key was already used with other arguments; use a new key")
                return Claim("replay", execution_id, started_at, json.loads(result), completed_at)
            if live and status == "running" and now - started_at < self.stale_after:
                if args_sha != digest:
                    raise Conflict("this idempotency key is in use by a running call with other arguments")
                raise Conflict("a call with this idempotency key is still running; retry later", retry_after=1.0)
            # failed, expired or stale: reclaimed by this call
            execution_id = secrets.token_hex(8)
            conn.execute(
                "UPDATE afi_receipts SET args_sha256=?, execution_id=?, status='running', result=NULL, "
                "started_at=?, completed_at=NULL WHERE principal=? AND space=? AND tool=? AND key=?",
                (digest, execution_id, now, *ident),
            )
            return Claim("run", execution_id, now, reclaimed=True)
        execution_id = secrets.token_hex(8)
        conn.execute(
            "INSERT INTO afi_receipts(principal, space, tool, key, args_sha256, execution_id, status, started_at) "
            "VALUES (?,?,?,?,?,?,'running',?)",
            (*ident, digest, execution_id, now),
        )
        if secrets.randbelow(64) == 0:  # now and then, drop receipts past their lifetime
            conn.execute("DELETE FROM afi_receipts WHERE started_at < ?", (now - self.ttl,))
        return Claim("run", execution_id, now)

    def finish(self, claim: Claim, *, result: dict[str, Any] | None, failed: bool) -> tuple[Claim, bool]:
        """Record how a claimed call ended; return the finished claim and whether the record was stored.

        A failed call (a refusal: nothing was written) leaves a reclaimable ``failed`` receipt. A store
        error is swallowed: the call already happened, and ``stored: false`` says the receipt was lost.
        """
        now = self._clock()
        status = "failed" if failed else "completed"
        try:
            cursor = self._conn().execute(
                "UPDATE afi_receipts SET status=?, result=?, completed_at=? WHERE execution_id=? AND status='running'",
                (status, None if result is None else json.dumps(result), now, claim.execution_id),
            )
            stored = cursor.rowcount == 1
        except sqlite3.Error:
            stored = False
        finished = Claim(claim.action, claim.execution_id, claim.started_at, result, now, claim.reclaimed)
        return finished, stored and not failed

    def status(self, caller: Caller, tool: str, key: str) -> Status | None:
        """Return the status of a receipt, or None when there is none (for tests and diagnostics)."""
        row = (
            self._conn()
            .execute(
                "SELECT status FROM afi_receipts WHERE principal=? AND space=? AND tool=? AND key=?",
                (caller.principal, caller.space, tool, key),
            )
            .fetchone()
        )
        return None if row is None else row[0]

    def close(self) -> None:
        """Close this thread's connection (each other thread's closes when that thread ends)."""
        self._db.close()
