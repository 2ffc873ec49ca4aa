"""The ``afi`` SSH subsystem: newline-delimited JSON-RPC 2.0, one method per AFI verb plus ``manifest``.

Requests and responses are one JSON object per line. Params are the verb's arguments by name
(``move`` takes ``from`` and ``to``; ``search`` takes a SearchRequest). Bytes travel as base64:
``read`` answers ``{"data": <base64>, "encoding": "base64", …}`` and ``write`` takes ``data`` (base64)
or ``text``. An AfiError is the JSON-RPC error ``{code: -32000, message, data: <the AfiError>}``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from afi.errors import AfiError, InvalidPath
from afi.model import SearchRequest, dump
from afi.provider import Caller, Provider

from ..offload import stray

__all__ = ["AFI_ERROR", "METHODS", "RpcEndpoint"]

AFI_ERROR = -32000
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
METHODS = ("manifest", "stat", "list", "read", "search", "write", "mkdir", "delete", "move")


class _BadParams(Exception):
    pass


def _get(
    params: dict[str, Any], name: str, kind: type | tuple[type, ...], default: Any = ..., *, nullable: bool = False
) -> Any:
    if name not in params or (params[name] is None and nullable):
        if default is ...:
            raise _BadParams(f"missing parameter {name!r}")
        return default
    value = params[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int, float))):
        raise _BadParams(f"parameter {name!r} has the wrong type")
    return value


def _bytes_param(params: dict[str, Any]) -> bytes:
    if "text" in params:
        return str(_get(params, "text", str)).encode("utf-8")
    raw = _get(params, "data", str)
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise _BadParams("parameter 'data' is not base64 (send UTF-8 text as 'text')") from None


class RpcEndpoint:
    """Given a provider and the caller of one SSH session, answer JSON-RPC lines.

    Args:
        manifest_extra: merged into the manifest's ``x-limits`` (the limits this binding enforces).
        before_call: run before each request (the per-session command limit); may raise AfiError.
    """

    def __init__(
        self,
        provider: Provider,
        caller: Caller,
        *,
        manifest_extra: dict[str, Any] | None = None,
        before_call: Callable[[], None] | None = None,
    ) -> None:
        self.provider = provider
        self.caller = caller
        self.manifest_extra = manifest_extra or {}
        self.before_call = before_call

    def handle_line(self, line: str) -> str | None:
        """Given one request line, return the response line (``None`` for a notification)."""
        try:
            request = json.loads(line)
        except json.JSONDecodeError as err:
            return self._error(None, PARSE_ERROR, f"not JSON: {err.msg}")
        except (ValueError, RecursionError) as err:  # a number past Python's digit limit; nesting past the stack
            return self._error(None, PARSE_ERROR, f"not JSON this server reads: {err or type(err).__name__}")
        if (
            not isinstance(request, dict)
            or request.get("jsonrpc") != "2.0"
            or not isinstance(request.get("method"), str)
        ):
            return self._error(
                request.get("id") if isinstance(request, dict) else None, INVALID_REQUEST, "not a JSON-RPC 2.0 request"
            )
        rid = request.get("id")
        params = request.get("params", {})
        if not isinstance(params, dict):
            return self._error(rid, INVALID_PARAMS, "params must be an object of named arguments")
        method = request["method"]
        if method not in METHODS:
            return self._error(rid, METHOD_NOT_FOUND, f"no method {method!r}; the methods are {', '.join(METHODS)}")
        try:
            if self.before_call is not None:
                self.before_call()
            result = self._call(method, params)
        except _BadParams as err:
            return self._error(rid, INVALID_PARAMS, str(err))
        except AfiError as err:
            return self._error(rid, AFI_ERROR, err.message, err.to_dict())
        except Exception as err:  # a provider bug must not kill the session
            failure = stray(err)
            return self._error(rid, AFI_ERROR, failure.message, failure.to_dict())
        if "id" not in request:
            return None
        return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}, ensure_ascii=False)

    @staticmethod
    def _error(rid: Any, code: int, message: str, data: dict[str, Any] | None = None) -> str:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        return json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}, ensure_ascii=False)

    def _call(self, method: str, params: dict[str, Any]) -> Any:
        p, who = self.provider, self.caller
        if method == "manifest":
            data = dump(p.manifest())
            if self.manifest_extra:
                data["x-limits"] = {**dict(data.get("x-limits") or {}), **self.manifest_extra}
            return data
        if method == "stat":
            return dump(p.stat(who, _get(params, "path", str)))
        if method == "list":
            page = p.list(
                who,
                _get(params, "path", str),
                limit=_get(params, "limit", int, 1000),
                cursor=_get(params, "cursor", str, None, nullable=True),
                glob=_get(params, "glob", str, None, nullable=True),
            )
            return dump(page)
        if method == "read":
            result = p.read(
                who,
                _get(params, "path", str),
                offset=_get(params, "offset", int, 0),
                length=_get(params, "length", int, None, nullable=True),
            )
            body = result.model_dump(mode="json", exclude={"data"}, exclude_none=True)
            return {"data": base64.b64encode(result.data).decode("ascii"), "encoding": "base64", **body}
        if method == "search":
            try:
                request = SearchRequest.model_validate(params)
            except ValidationError as err:
                raise InvalidPath(f"bad search request: {err.errors()[0].get('msg')}") from None
            return dump(p.search(who, request))
        if method == "write":
            entry = p.write(
                who,
                _get(params, "path", str),
                _bytes_param(params),
                offset=_get(params, "offset", int, None, nullable=True),
                append=_get(params, "append", bool, False),
                create_only=_get(params, "create_only", bool, False),
                if_match=_get(params, "if_match", str, None, nullable=True),
            )
            return dump(entry)
        if method == "mkdir":
            return dump(p.mkdir(who, _get(params, "path", str), parents=_get(params, "parents", bool, False)))
        if method == "delete":
            return dump(p.delete(who, _get(params, "path", str), recursive=_get(params, "recursive", bool, False)))
        entry = p.move(
            who, _get(params, "from", str), _get(params, "to", str), overwrite=_get(params, "overwrite", bool, False)
        )
        return dump(entry)
