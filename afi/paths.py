"""AFI paths: absolute, POSIX, one root ``/``, case-sensitive (docs/afi.md, "Paths").

``normalize`` is the one gate every verb passes a path through before any I/O.
"""

from __future__ import annotations

from .errors import InvalidPath

__all__ = [
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "RESERVED_PREFIX",
    "basename",
    "is_within",
    "join",
    "normalize",
    "parent",
    "split",
]

MAX_PATH_BYTES = 1024
MAX_NAME_BYTES = 255
RESERVED_PREFIX = "/.afi"


def normalize(path: str) -> str:
    """Given a client path, return its normal form: absolute, no ``.``/``..``/``//``, no trailing ``/``.

    Raises:
        InvalidPath: not a string, empty, relative, a NUL byte, a lone surrogate (not Unicode text: JSON
            can spell ``"\\ud800"``, UTF-8 cannot carry it; SSH and SFTP pass a byte that is not UTF-8 on as
            one), a ``..`` above ``/``, or too long.

    A U+FFFD in a path is a character like any other: a door that decodes bytes decodes them strictly
    (the HTTP query, a JSON body, SSH and SFTP names), so it is never a stand-in for a byte that was
    lost on the way, and a name that already holds one stays reachable.
    """
    if not isinstance(path, str):
        raise InvalidPath("a path must be a string")
    if path == "":
        raise InvalidPath("the path is empty; paths are absolute, starting with '/'", path=path)
    if "\x00" in path:
        raise InvalidPath("the path contains a NUL byte", path=path.replace("\x00", "\\0"))
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = path.encode("utf-8", "backslashreplace").decode("utf-8")
        raise InvalidPath(
            "the path is not UTF-8 text: it holds a byte that is not UTF-8 or a lone surrogate (\\ud800 … \\udfff)",
            path=shown[:256],
        ) from None
    if not path.startswith("/"):
        raise InvalidPath("paths are absolute: start the path with '/'", path=path)
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise InvalidPath(f"the path is longer than {MAX_PATH_BYTES} bytes", path=path[:64] + "…")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise InvalidPath("'..' climbs above the root '/'", path=path)
            parts.pop()
            continue
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise InvalidPath(f"a path segment is longer than {MAX_NAME_BYTES} bytes", path=path[:64] + "…")
        parts.append(part)
    return "/" + "/".join(parts)


def split(path: str) -> list[str]:
    """Given a normalised path, return its segments (``/`` has none)."""
    return [p for p in path.split("/") if p]


def join(base: str, *names: str) -> str:
    """Join a normalised directory path and child names."""
    out = base.rstrip("/")
    for name in names:
        out = f"{out}/{name}"
    return out or "/"


def parent(path: str) -> str:
    """Given a normalised path, return its parent (``/`` is its own parent)."""
    if path == "/":
        return "/"
    head = path.rsplit("/", 1)[0]
    return head or "/"


def basename(path: str) -> str:
    """Given a normalised path, return its last segment (``""`` for ``/``)."""
    return path.rsplit("/", 1)[-1]


def is_within(path: str, prefix: str) -> bool:
    """True when normalised ``path`` is ``prefix`` or lies below it."""
    if prefix == "/":
        return True
    return path == prefix or path.startswith(prefix + "/")
