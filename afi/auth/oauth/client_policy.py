"""The operator's switches for client ID metadata documents (``afi serve --client-metadata-*``), apart
from the fetch itself (:mod:`.client_metadata`), so that naming them loads no HTTP client."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

import certifi

__all__ = ["FETCH_SECONDS", "MAX_DOCUMENT_BYTES", "ClientMetadataPolicy"]

MAX_DOCUMENT_BYTES = 16 * 1024
FETCH_SECONDS = 5.0


@dataclass(frozen=True)
class ClientMetadataPolicy:
    """The operator's switches (``afi serve``): whether URL client ids are accepted, the hosts that may
    resolve to non-public addresses, a CA file trusted beside the usual CAs, the fetch's limits."""

    enabled: bool = True
    allow_hosts: frozenset[str] = frozenset()
    ca_file: str | None = None
    timeout: float = FETCH_SECONDS
    max_bytes: int = MAX_DOCUMENT_BYTES

    def tls(self) -> ssl.SSLContext:
        """The TLS context of a fetch: the usual CAs (certifi), and the operator's CA file if named.

        Raises:
            OSError, ssl.SSLError: the CA file cannot be read or holds no certificate.
        """
        context = ssl.create_default_context(cafile=certifi.where())
        if self.ca_file:
            context.load_verify_locations(cafile=self.ca_file)
        return context
