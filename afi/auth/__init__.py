"""Who may come in, and what is kept about them: the door every binding checks callers at.

Not specific to any provider: API keys (:mod:`.keys`), SSH public keys (:mod:`.ssh_keys`, and the
OpenSSH authorized-keys file in :mod:`.authorized_keys`), the door itself (:mod:`.door`: a token or
a loopback owner becomes a :class:`~afi.provider.Caller`), rate limits (:mod:`.ratelimit`), the audit
log of write verbs (:mod:`.audit`) and the MCP idempotency receipts (:mod:`.receipts`). Each keeps
its own table in the store (a SQLite file or a PostgreSQL database, :mod:`afi.storage.database`);
the tables are created by the store's migrations.
"""

from __future__ import annotations

from .audit import AuditLog
from .authorized_keys import AuthorizedKeys, caller_for, fingerprint, parse_key_line
from .door import Door, InvalidToken, is_loopback_host, is_loopback_origin
from .keys import LOCAL_OWNER, TOKEN_PREFIX, KeyRecord, KeyStore
from .ratelimit import RateLimiter
from .receipts import ReceiptStore
from .ssh_keys import SshKeyRecord, SshKeyStore

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
