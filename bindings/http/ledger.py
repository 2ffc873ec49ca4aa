"""The ledger's HTTP routes: ``POST /ledger/{session}/{op}`` appends to a session's branch.

``op`` is one of ``append`` (``{messages: [{role, text, entry_id, timestamp?}]}``), ``observe``,
``reflect``, ``scope.open``, ``scope.close``, ``bind``; the body is that operation's JSON fields.
Same door as the AFI routes (bearer key, space, rate limit); a write needs ``afi:write``. The route
only translates: the provider's ``ledger_write`` (:class:`~afi.provider.LedgerProvider`) does the work,
and answers 405 ``unsupported`` when the provider keeps no ledger.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse

from afi.errors import Unsupported
from afi.provider import LedgerProvider

from ..offload import offload
from .door import Served, Who

__all__ = ["LEDGER_OPS", "router"]

LEDGER_OPS = ("append", "observe", "reflect", "scope.open", "scope.close", "bind")


router = APIRouter()


@router.post("/ledger/{session}/{op}", summary="Append to a session's observational ledger", tags=["ledger"])
async def ledger_write(
    provider: Served, who: Who, session: str, op: str, body: Annotated[dict[str, Any], Body()]
) -> JSONResponse:
    if not isinstance(provider, LedgerProvider):
        raise Unsupported("this provider keeps no observational ledger")
    return JSONResponse(await offload(provider.ledger_write, who, op, session, body))
