"""The provider's admin verbs (:class:`afi.provider.AdminProvider`): the audit log and the API keys of a space.

A caller sees only its own space: the audit rows of that space (``afi:read``), and the keys bound to
it (``afi:admin``; the local owner is admin of whichever space it works in). Creating and revoking a
key is recorded in the audit log like every write verb, refused or not, at ``/.afi/keys/<id>``. The
key store keeps its own connection (its own transaction), so these verbs do not run under the
space's write transaction.
"""

from __future__ import annotations

from typing import Any

from afi.auth.audit import AuditLog
from afi.errors import AfiError, NotFound, Unsupported
from afi.provider import Caller

__all__ = ["KEYS_PATH", "AdminVerbs"]

KEYS_PATH = "/.afi/keys"
MAX_AUDIT_ROWS = 1000


class AdminVerbs:
    """Mixed into the memory provider, which sets ``audit`` and ``_keys`` (a KeyStore, or None)."""

    audit: AuditLog
    _keys: Any

    def audit_rows(self, caller: Caller, *, limit: int = 100) -> list[dict[str, Any]]:
        """The most recent audit rows of the caller's space, newest first (at most 1,000)."""
        caller.require("afi:read")
        return self.audit.recent(limit=max(1, min(limit, MAX_AUDIT_ROWS)), space=caller.space)

    def keys_list(self, caller: Caller) -> list[dict[str, Any]]:
        """The keys bound to the caller's space, revoked ones too, oldest first (never a token)."""
        caller.require("afi:admin", path=KEYS_PATH)
        return [_record(key) for key in self._store().list() if key.space == caller.space]

    def key_create(self, caller: Caller, scopes: list[str], name: str | None = None) -> dict[str, Any]:
        """Create a key bound to the caller's space; the answer holds its token, shown this once."""

        def run() -> dict[str, Any]:
            caller.require("afi:admin", path=KEYS_PATH)
            record, token = self._store().create(space=caller.space, scopes=tuple(scopes), name=name)
            return {**_record(record), "token": token}

        return self._recorded(caller, "key.create", KEYS_PATH, run)

    def key_revoke(self, caller: Caller, key_id: str) -> dict[str, Any]:
        """Revoke an active key of the caller's space; another space's key is ``not_found``."""
        where = f"{KEYS_PATH}/{key_id}"

        def run() -> dict[str, Any]:
            caller.require("afi:admin", path=where)
            store = self._store()
            mine = [key for key in store.list() if key.id == key_id and key.space == caller.space]
            if not mine or not mine[0].active or not store.revoke(key_id):
                raise NotFound(f"no active key {key_id!r} in this space", path=where)
            return {"id": key_id, "revoked": True}

        return self._recorded(caller, "key.revoke", where, run)

    def _store(self) -> Any:
        if self._keys is None:
            raise Unsupported("this provider was opened without API keys (afi serve has them)")
        return self._keys

    def _recorded(self, caller: Caller, verb: str, path: str, run: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = run()
        except AfiError as err:
            self.audit.record(caller, verb, path, err.code)
            raise
        self.audit.record(caller, verb, path, "ok")
        return result


def _record(key: Any) -> dict[str, Any]:
    return {
        "id": key.id,
        "name": key.name,
        "space": key.space,
        "scopes": list(key.scopes),
        "created_at": key.created_at,
        "revoked_at": key.revoked_at,
    }
