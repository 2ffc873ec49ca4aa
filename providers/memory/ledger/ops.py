"""The ledger's operations as the remote doors send them: an op name, a session id and a JSON body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fabric.errors import MemoryValidationError
from .ledger import Ledger

__all__ = ["LEDGER_OPS", "apply_op"]

_OPS: dict[str, tuple[str, frozenset[str]]] = {
    "append": ("append_many", frozenset({"messages"})),
    "observe": ("observe", frozenset({"text", "source_entry_ids", "id", "entry_id", "timestamp"})),
    "reflect": ("reflect", frozenset({"text", "observation_ids", "scope_id", "id", "entry_id", "timestamp"})),
    "scope.open": ("open_scope", frozenset({"name", "id", "entry_id", "timestamp"})),
    "scope.close": ("close_scope", frozenset({"scope_id", "timestamp"})),
    "bind": ("bind", frozenset({"reflection_id", "scope_id"})),
}
LEDGER_OPS: tuple[str, ...] = tuple(_OPS)
_REQUIRED: dict[str, frozenset[str]] = {
    "observe": frozenset({"text"}),
    "reflect": frozenset({"text", "observation_ids"}),
}


def apply_op(ledger: Ledger, op: str, session_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """Given an operation name (:data:`LEDGER_OPS`), a session id and a JSON body, run it and return
    a JSON-ready result. What every remote door (HTTP, MCP, CLI) calls; unknown ops or fields refused."""
    if op not in _OPS:
        raise MemoryValidationError(f"unknown ledger operation {op!r} (known: {', '.join(LEDGER_OPS)})")
    method, allowed = _OPS[op]
    if not isinstance(body, Mapping):
        raise MemoryValidationError("the body must be a JSON object")
    unknown = set(body) - allowed
    if unknown:
        raise MemoryValidationError(f"unknown field(s) for {op}: {', '.join(sorted(unknown))}")
    missing = _REQUIRED.get(op, frozenset()) - set(body)
    if missing:
        raise MemoryValidationError(f"{op} needs the field(s): {', '.join(sorted(missing))}")
    session = ledger.session(session_id)
    args = dict(body)
    if op == "append":
        messages = args.get("messages")
        if not isinstance(messages, list) or not messages:
            raise MemoryValidationError("append takes messages: a non-empty list of {role, text, entry_id}")
        if not all(isinstance(m, Mapping) for m in messages):
            raise MemoryValidationError("each message is an object {role, text, entry_id, timestamp?}")
        return {"session": session.id, "entries": [e.model_dump() for e in session.append_many(messages)]}
    if op == "scope.open":
        return {"session": session.id, "scope": session.open_scope(args.pop("name", None), **args).model_dump()}
    if op == "scope.close":
        return {"session": session.id, "scope": session.close_scope(args.pop("scope_id", None), **args).model_dump()}
    if op == "bind":
        return {"session": session.id, "reflection": session.bind(args.get("reflection_id", ""),
                                                                   args.get("scope_id", "")).model_dump()}  # fmt: skip
    result = getattr(session, method)(**args)
    return {"session": session.id, op.replace("observe", "observation").replace("reflect", "reflection"):
            result.model_dump()}  # fmt: skip
