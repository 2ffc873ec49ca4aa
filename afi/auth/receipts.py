"""Idempotency receipts for durable writes (docs/afi.md, "Idempotent writes").

A write called with an idempotency key first *claims* a receipt bound to (principal, space, tool,
key) and a SHA-256 of the canonical arguments, in the store, for 24 hours:

- no receipt, or a failed, expired or stale-running one: the call is claimed and runs;
- a completed receipt with the same arguments: its stored result is replayed, nothing runs again;
- the same key with other arguments: refused with ``conflict``;
- a receipt still running: refused with ``conflict`` and ``retry_after`` (come back later).

Any binding (MCP today, HTTP tomorrow) uses the same store, so this lives in the core.

Two callers claiming one key at once never both run, whether they are threads, processes, or
replicas on two machines sharing one PostgreSQL database. On SQLite a claim reads and writes the
receipt inside one ``BEGIN IMMEDIATE`` transaction: the file's write lock puts claimers in a line. On
PostgreSQL the claim locks the receipt's row (``SELECT ... FOR UPDATE``) and creates a missing one
with ``INSERT ... ON CONFLICT DO NOTHING``: of two claimers that both found none, the second's insert
waits for the first's transaction, then inserts nothing, and that claimer decides again on the row the
first left.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import Conflict, InvalidPath
from ..model import rfc3339
from ..provider import Caller
from ..storage.database import Connection, open_database

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
_CLAIM_ATTEMPTS = 3  # inserts a claim may lose to others' before it asks the caller to retry
_COLUMNS = "args_sha256, execution_id, status, result, started_at, completed_at"
_WHERE_KEY = "principal=? AND space=? AND tool=? AND key=?"


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
    """Receipts in the ``afi_receipts`` table of one store: a SQLite file (WAL, busy timeout, one connection
    per thread) or a PostgreSQL database (a pool shared by the process).

    Args:
        db: the store, a file path or a ``postgresql://`` URL (the same one the provider uses).
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
        self._db = open_database(db, busy_timeout_ms=_BUSY_TIMEOUT_MS)
        self._store_errors = self._db.engine.store_errors
        self._lock_row = self._db.engine.lock_row

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
        with self._db.transaction() as conn:
            for _ in range(_CLAIM_ATTEMPTS):
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM afi_receipts WHERE {_WHERE_KEY}{self._lock_row}", ident
                ).fetchone()
                claim = self._decide(conn, ident, digest, now, row)
                if claim is not None:
                    return claim
        raise Conflict("a call with this idempotency key is just starting; retry later", retry_after=1.0)

    def _decide(self, conn: Connection, ident: tuple[str, ...], digest: str, now: float, row: Any) -> Claim | None:
        """Given the receipt's row (locked) or None, decide; None when another claimer created the row
        first (PostgreSQL only: on SQLite the transaction holds the file's write lock)."""
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
                f"started_at=?, completed_at=NULL WHERE {_WHERE_KEY}",
                (digest, execution_id, now, *ident),
            )
            return Claim("run", execution_id, now, reclaimed=True)
        execution_id = secrets.token_hex(8)
        inserted = conn.execute(
            "INSERT INTO afi_receipts(principal, space, tool, key, args_sha256, execution_id, status, started_at) "
            "VALUES (?,?,?,?,?,?,'running',?) ON CONFLICT (principal, space, tool, key) DO NOTHING RETURNING key",
            (*ident, digest, execution_id, now),
        ).fetchall()
        if not inserted:
            return None
        if secrets.randbelow(64) == 0:  # now and then, drop receipts past their lifetime
            self._prune(conn, now - self.ttl)
        return Claim("run", execution_id, now)

    def _prune(self, conn: Connection, before: float) -> None:
        """Drop the receipts started before ``before``. On PostgreSQL, rows another claim holds are
        skipped, not waited for: two pruning claims never wait on each other (no deadlock)."""
        self._db.engine.prune_receipts(conn, before)

    def finish(self, claim: Claim, *, result: dict[str, Any] | None, failed: bool) -> tuple[Claim, bool]:
        """Record how a claimed call ended; return the finished claim and whether the record was stored.

        A failed call (a refusal: nothing was written) leaves a reclaimable ``failed`` receipt. A store
        error is swallowed: the call already happened, and ``stored: false`` says the receipt was lost.
        """
        now = self._clock()
        status = "failed" if failed else "completed"
        try:
            with self._db.transaction() as conn:
                cursor = conn.execute(
                    "UPDATE afi_receipts SET status=?, result=?, completed_at=? "
                    "WHERE execution_id=? AND status='running'",
                    (status, None if result is None else json.dumps(result), now, claim.execution_id),
                )
                stored = cursor.rowcount == 1
        except self._store_errors:
            stored = False
        finished = Claim(claim.action, claim.execution_id, claim.started_at, result, now, claim.reclaimed)
        return finished, stored and not failed

    def status(self, caller: Caller, tool: str, key: str) -> Status | None:
        """Return the status of a receipt, or None when there is none (for tests and diagnostics)."""
        with self._db.read() as conn:
            row = conn.execute(
                f"SELECT status FROM afi_receipts WHERE {_WHERE_KEY}", (caller.principal, caller.space, tool, key)
            ).fetchone()
        return None if row is None else row[0]

    def close(self) -> None:
        """Close this thread's SQLite connection (each other thread's closes when that thread ends).

        On PostgreSQL a thread holds no connection between statements, and the pool is the whole
        process's, so there is nothing of this store's own to close.
        """
        self._db.engine.release(self._db)
