"""SSH public keys as principals: parse OpenSSH key lines, fingerprint them, read an authorized-keys file.

An authorized-keys line is OpenSSH's (``[options] type base64 [comment]``); three options of ours
map the key to a caller, e.g.::

    afi-space="default",afi-scopes="afi:read afi:write",afi-principal="alice" ssh-ed25519 AAAA… alice@laptop

The file is the owner's: a plain line (a user's own ``id_ed25519.pub``, no options) reads and writes
the space ``default``, as the owner does; ``afi-space`` and ``afi-scopes`` narrow a key (e.g.
``afi-scopes="afi:read"``). ``afi-principal`` defaults to ``ssh:<fingerprint>``.
OpenSSH's own options (``restrict``, ``from=…``) are accepted and ignored.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidPath
from ..provider import SCOPES, Caller

__all__ = ["AuthorizedKeys", "PublicKey", "caller_for", "fingerprint", "parse_key_line"]

_KEY_TYPES = re.compile(r"^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|sk-\S+@openssh\.com)$")
_SPACE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def fingerprint(blob: bytes) -> str:
    """Given a key's wire blob, return its OpenSSH SHA256 fingerprint (``SHA256:…``, no padding)."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


@dataclass(frozen=True)
class PublicKey:
    """One parsed key line: the key's type and blob, its comment, and its options."""

    key_type: str
    blob: bytes
    comment: str = ""
    options: dict[str, str] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.blob)

    def openssh(self) -> str:
        """Return the key as one OpenSSH public-key line (without options)."""
        body = f"{self.key_type} {base64.b64encode(self.blob).decode()}"
        return f"{body} {self.comment}" if self.comment else body


def _split_options(text: str) -> tuple[dict[str, str], str]:
    """Given a line that starts with options, return them and the rest of the line."""
    options: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n and text[i] not in " \t":
        match = re.match(r'([A-Za-z0-9_-]+)(="((?:[^"\\]|\\.)*)")?', text[i:])
        if match is None:
            raise InvalidPath("malformed options in the key line")
        options[match.group(1).lower()] = (match.group(3) or "").replace('\\"', '"')
        i += match.end()
        if i < n and text[i] == ",":
            i += 1
    return options, text[i:].strip()


def parse_key_line(line: str) -> PublicKey:
    """Given one OpenSSH public-key or authorized-keys line, return the key.

    Raises:
        InvalidPath: not a key line, an unknown key type, or a blob that is not the key it claims.
    """
    text = line.strip()
    first = text.split(None, 1)[0] if text else ""
    options: dict[str, str] = {}
    if first and not _KEY_TYPES.match(first):
        options, text = _split_options(text)
    parts = text.split(None, 2)
    if len(parts) < 2 or not _KEY_TYPES.match(parts[0]):
        raise InvalidPath("not an OpenSSH public key line ('ssh-ed25519 AAAA… comment')")
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidPath("the key's base64 is malformed") from None
    if len(blob) < 4:
        raise InvalidPath("the key blob is too short")
    (size,) = struct.unpack(">I", blob[:4])
    if blob[4 : 4 + size].decode("ascii", "replace") != parts[0]:
        raise InvalidPath(f"the key blob is not a {parts[0]} key")
    return PublicKey(parts[0], blob, parts[2].strip() if len(parts) > 2 else "", options)


def caller_for(key: PublicKey) -> Caller:
    """Given a key with our options, return the caller it maps to (read and write unless scopes say less).

    Raises:
        InvalidPath: an unknown scope or a malformed space name.
    """
    space = key.options.get("afi-space", "default")
    if not _SPACE.match(space):
        raise InvalidPath(f"bad afi-space {space!r}")
    scopes = tuple(key.options.get("afi-scopes", "afi:read afi:write").replace(",", " ").split())
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown or not scopes:
        raise InvalidPath(f"bad afi-scopes {key.options.get('afi-scopes')!r}: the scopes are {', '.join(SCOPES)}")
    principal = key.options.get("afi-principal") or "ssh:" + key.fingerprint.removeprefix("SHA256:")[:16]
    return Caller(principal=principal, space=space, scopes=frozenset(scopes))


class AuthorizedKeys:
    """An authorized-keys file, read again whenever it changes on disk.

    Raises (at construction):
        InvalidPath: the file does not exist, or a line is malformed (bad configuration fails
            loudly at start-up, naming the line).
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path).expanduser()
        self._stamp: int | None = None
        self._callers: dict[str, Caller] = {}
        if not self.path.is_file():
            raise InvalidPath(f"the authorized-keys file {self.path} does not exist")
        self._load()

    def _load(self) -> None:
        stamp = self.path.stat().st_mtime_ns
        if stamp == self._stamp:
            return
        callers: dict[str, Caller] = {}
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                key = parse_key_line(line)
                callers[key.fingerprint] = caller_for(key)
            except InvalidPath as err:
                raise InvalidPath(f"{self.path}:{number}: {err.message}") from None
        self._callers, self._stamp = callers, stamp

    def lookup(self, blob: bytes) -> Caller | None:
        """Given a presented key's blob, return its caller, or ``None`` when the file does not list it."""
        with contextlib.suppress(OSError, InvalidPath):  # a half-edited file keeps the last good set
            self._load()
        return self._callers.get(fingerprint(blob))

    def __len__(self) -> int:
        return len(self._callers)

    def fingerprints(self) -> Iterable[str]:
        return tuple(self._callers)
