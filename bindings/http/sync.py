"""The sync routes: another store (``afi sync https://…``) reads this store's changes and applies its own.

``GET /sync/store`` names this store; ``GET /sync/changes?since=N&peer=ID`` is a batch of the space's
note changes after ``since`` for that peer; ``GET /sync/received?peer=ID`` is how far this store has
applied the peer's; ``POST /sync/apply?label=L`` applies a peer's batch (the body) in one transaction.
``/sync/files/...`` do the same for the workspace's file versions (with their bytes, base64) and
``/sync/ledger/...`` for the ledger's entries; ``GET /sync/state`` is the space's working blocks and
snapshots, and ``POST /sync/state`` merges a peer's. Same door as the AFI routes (bearer key,
space, rate limit); each needs ``afi:admin`` on the space, and answers 405 ``unsupported`` when the
provider does not sync. The provider checks the batch; the route only translates.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query
from fastapi.responses import JSONResponse

from afi.errors import Unsupported
from afi.provider import Provider, SyncProvider

from ..offload import offload
from .door import Served, Who

__all__ = ["router"]

router = APIRouter()

Peer = Annotated[str, Query(min_length=1, max_length=64, description="the asking store's id")]


def _syncing(provider: Provider) -> SyncProvider:
    if not isinstance(provider, SyncProvider):
        raise Unsupported("this provider does not sync")
    return provider


@router.get("/sync/store", summary="This store's id among the stores it syncs with", tags=["sync"])
async def store(provider: Served, who: Who) -> JSONResponse:
    syncing = _syncing(provider)
    who.require("afi:admin", path="/")
    return JSONResponse({"store": await offload(syncing.store_id)})


Since = Annotated[int, Query(ge=0, lt=2**63)]
Label = Annotated[str, Query(min_length=1, max_length=500)]


def _stream(prefix: str, what: str, changes_verb: str, received_verb: str, apply_verb: str) -> None:
    """Add a stream's three routes: its changes for a peer, how far a peer's are applied, apply a batch."""

    async def changes(provider: Served, who: Who, peer: Peer, since: Since = 0) -> JSONResponse:
        verb = getattr(_syncing(provider), changes_verb)
        return JSONResponse(await offload(verb, who, since=since, peer=peer))

    async def received(provider: Served, who: Who, peer: Peer) -> JSONResponse:
        verb = getattr(_syncing(provider), received_verb)
        return JSONResponse({"received": await offload(verb, who, peer)})

    async def apply(provider: Served, who: Who, batch: Annotated[Any, Body()], label: Label = "peer") -> JSONResponse:
        verb = getattr(_syncing(provider), apply_verb)
        applied = await offload(verb, who, batch, label=label)
        return JSONResponse(applied.to_json())

    router.get(f"{prefix}/changes", summary=f"A batch of the space's {what} for a peer", tags=["sync"],
               name=f"{prefix}/changes")(changes)  # fmt: skip
    router.get(f"{prefix}/received", summary=f"How far this store has applied a peer's {what}", tags=["sync"],
               name=f"{prefix}/received")(received)  # fmt: skip
    router.post(f"{prefix}/apply", summary=f"Apply a peer's batch of {what} in one transaction",
                tags=["sync", "write"], name=f"{prefix}/apply")(apply)  # fmt: skip


_stream("/sync", "note changes", "sync_changes", "sync_received", "sync_apply")
_stream("/sync/files", "file versions", "sync_file_changes", "sync_received_files", "sync_apply_files")
_stream("/sync/ledger", "ledger entries", "sync_ledger_changes", "sync_received_ledger", "sync_apply_ledger")


@router.get("/sync/state", summary="The space's working blocks and snapshots", tags=["sync"])
async def state(provider: Served, who: Who) -> JSONResponse:
    return JSONResponse(await offload(_syncing(provider).sync_state, who))


@router.post("/sync/state", summary="Merge a peer's working blocks and snapshots", tags=["sync", "write"])
async def apply_state(provider: Served, who: Who, body: Annotated[Any, Body()]) -> JSONResponse:
    applied = await offload(_syncing(provider).sync_apply_state, who, body)
    return JSONResponse(applied.to_json())
