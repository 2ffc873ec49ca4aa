"""Who may come in, and what is kept about them: the door every binding checks callers at.

Not specific to any provider: API keys (:mod:`.keys`), SSH public keys (:mod:`.ssh_keys`, and the
OpenSSH authorized-keys file in :mod:`.authorized_keys`), the door itself (:mod:`.door`: a token or
a loopback owner becomes a :class:`~afi.provider.Caller`), rate limits (:mod:`.ratelimit`), the audit
log of write verbs (:mod:`.audit`) and the MCP idempotency receipts (:mod:`.receipts`). Each keeps
its own table in the store (a SQLite file or a PostgreSQL database, :mod:`afi.storage.database`);
the tables are created by the store's migrations.
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:
    from .audit import AuditLog
    from .authorized_keys import AuthorizedKeys, caller_for, fingerprint, parse_key_line
    from .door import Door, InvalidToken, is_loopback_host, is_loopback_origin
    from .keys import LOCAL_OWNER, TOKEN_PREFIX, KeyRecord, KeyStore
    from .ratelimit import RateLimiter
    from .receipts import ReceiptStore
    from .ssh_keys import SshKeyRecord, SshKeyStore

# Each name loads its module on first use (PEP 562): the provider writes the audit log through
# afi.auth.audit, and importing this package must not bring the key store's JWT and HTTP clients with it.
_HOME = {
    "AuditLog": "audit",
    **dict.fromkeys(("AuthorizedKeys", "caller_for", "fingerprint", "parse_key_line"), "authorized_keys"),
    **dict.fromkeys(("Door", "InvalidToken", "is_loopback_host", "is_loopback_origin"), "door"),
    **dict.fromkeys(("LOCAL_OWNER", "TOKEN_PREFIX", "KeyRecord", "KeyStore"), "keys"),
    "RateLimiter": "ratelimit",
    "ReceiptStore": "receipts",
    **dict.fromkeys(("SshKeyRecord", "SshKeyStore"), "ssh_keys"),
}

__all__ = [
    "LOCAL_OWNER",
    "TOKEN_PREFIX",
    "AuditLog",
    "AuthorizedKeys",
    "Door",
    "InvalidToken",
    "KeyRecord",
    "KeyStore",
    "RateLimiter",
    "ReceiptStore",
    "SshKeyRecord",
    "SshKeyStore",
    "caller_for",
    "fingerprint",
    "is_loopback_host",
    "is_loopback_origin",
    "parse_key_line",
]


def __getattr__(name: str) -> typing.Any:
    """Given a public name, import the module that defines it and return it (kept for next time)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'afi.auth' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
