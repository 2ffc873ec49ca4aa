"""``GET /sync/conflicts``: the space's open conflicts, the names a sync settled that no write has
answered yet (``afi:read``).

Same door as the AFI routes (bearer key, space, rate limit); mounted at the root and per space. The
provider's verb (:class:`~afi.provider.ConflictsProvider`) does the work; 405 ``unsupported`` when
the provider has none. The sync routes themselves (:mod:`.sync`) need ``afi:admin``: reading what a
sync left open does not.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from afi.errors import Unsupported
from afi.provider import ConflictsProvider

from ..offload import offload
from .door import Served, Who

__all__ = ["router"]

router = APIRouter()


@router.get("/sync/conflicts", summary="The space's open conflicts from afi sync", tags=["sync"])
async def conflicts(provider: Served, who: Who) -> JSONResponse:
    if not isinstance(provider, ConflictsProvider):
        raise Unsupported("this provider keeps no conflicts")
    return JSONResponse({"conflicts": await offload(provider.open_conflicts, who)})
