"""Where each thing lives in a bundle, and how its JSON is written (docs/bundle.md).

A bundle is a folder::

    manifest.json                      format, version, embedder, counts, a SHA-256 of every other file
    blobs/<sha256>                     the bytes of kept workspace-file versions, once each
    spaces/<space>/space.json          the working value's version, what it holds besides blocks, gc horizon
    spaces/<space>/notes/<id>.md       one note version: its whole row as front matter, then its content
    spaces/<space>/working/<block>.md  one working block
    spaces/<space>/lineage.json        revoked source entries
    spaces/<space>/snapshots.json      named instants
    spaces/<space>/ledger/<session>.jsonl  a session: a header line, then its entries in order
    spaces/<space>/files/index.json    the workspace's files and folders (size, mtime, SHA-256)
    spaces/<space>/files/current/<path>    each file's bytes
    spaces/<space>/files/versions.jsonl    kept versions of workspace files (when the store keeps them)

Every file is written the same way each time (sorted keys, one trailing newline, no time of the
export itself), so two exports of the same store are the same bytes, and a bundle diffs well in git.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from ..fabric.fields import NOTE_ID

__all__ = [
    "FORMAT",
    "MANIFEST",
    "NOTE_ID",
    "VERSION",
    "dump_json",
    "dump_line",
    "file_sha256",
    "session_file",
    "session_from_file",
    "space_dir",
]

FORMAT = "afi-bundle"
VERSION = 1
MANIFEST = "manifest.json"
SHA256 = re.compile(r"^[0-9a-f]{64}$")


def space_dir(space: str) -> str:
    """The bundle-relative folder of a space."""
    return f"spaces/{space}"


def session_file(session_id: str) -> str:
    """A session id as a file name: percent-encoded past ``[A-Za-z0-9_.~-]``, a leading dot too, so
    any id (``..``, ``a:b``, ``ünï``) names one file of its own."""
    name = quote(session_id, safe="")
    return ("%2E" + name[1:] if name.startswith(".") else name) + ".jsonl"


def session_from_file(name: str) -> str:
    """The session id a ledger file name encodes (:func:`session_file` read back)."""
    return unquote(name.removesuffix(".jsonl"))


def dump_json(value: Any) -> bytes:
    """A JSON document as the bundle writes it: sorted keys, two-space indent, UTF-8, one final newline."""
    return (json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()


def dump_line(value: Any) -> str:
    """One JSON Lines record: sorted keys, compact, UTF-8 (a newline in a string is escaped)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
