"""Which workspace files become memory notes: text files, less the paths a person would not recall.

Every file under ``/files`` is stored, listed and greppable. Only some are also a ``file`` note that
semantic recall serves: a repository's ``.git/`` objects, a build's caches or an editor's swap files
would answer "how do we deploy?" with ``.git/index``. A path is left out when :data:`DEFAULT_IGNORED`
or the workspace's own ``/files/.afiignore`` (gitignore syntax, read by pathspec; a ``!`` line
brings a default back; a write of lines that are not patterns is refused, naming the line, and a line
edited in behind the provider's back that is not one is skipped, as git skips it) says so, and a
file is left out when it is binary, empty or only whitespace.
"""

from __future__ import annotations

import codecs
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from afi.errors import InvalidPath

if TYPE_CHECKING:
    import pathspec

__all__ = ["AFIIGNORE", "AFIIGNORE_MAX_BYTES", "DEFAULT_IGNORED", "IgnoreRules", "check_afiignore", "note_text"]

AFIIGNORE = ".afiignore"
AFIIGNORE_MAX_BYTES = 64 * 1024
DEFAULT_IGNORED = (
    ".git/", ".hg/", ".svn/", ".jj/", "node_modules/", "__pycache__/", ".venv/", ".mypy_cache/", ".pytest_cache/",
    ".ruff_cache/", "*.pyc", "*.swp", "*.swo", "*~", ".DS_Store", f"/{AFIIGNORE}",
)  # fmt: skip


class IgnoreRules:
    """The defaults plus one workspace's ``.afiignore``, re-read whenever that file's bytes change."""

    def __init__(self, read_afiignore: Callable[[], bytes | None]) -> None:
        self._read = read_afiignore
        self._lock = threading.Lock()
        self._source: bytes | None = None
        self._spec = _spec(None)

    def ignored(self, rel: str) -> bool:
        """True when the workspace path ``rel`` (no leading slash) is not to be a note."""
        return bool(self.spec().match_file(rel))

    def spec(self) -> pathspec.GitIgnoreSpec:
        source = self._read()
        with self._lock:
            if source != self._source:
                self._source, self._spec = source, _spec(source)
            return self._spec


def _spec(source: bytes | None) -> pathspec.GitIgnoreSpec:
    """The defaults plus the file's valid lines, in order (git skips a line it cannot read; so do we)."""
    lines = list(DEFAULT_IGNORED)
    if source:
        lines += [line for _, line, problem in _lines(source) if problem is None]
    return _compiled(lines)


def _compiled(lines: list[str]) -> pathspec.GitIgnoreSpec:
    """Given gitignore lines, return them compiled (pathspec's or the regex engine's error for a bad one)."""
    import pathspec  # at the first pattern compiled: listing and reading the workspace compile none

    return pathspec.GitIgnoreSpec.from_lines(lines)


def _lines(source: bytes) -> list[tuple[int, str, str | None]]:
    """Each line of an ``.afiignore`` with its number and why it is not a pattern (None when it is)."""
    out: list[tuple[int, str, str | None]] = []
    for number, line in enumerate(source.decode("utf-8", "replace").splitlines(), start=1):
        try:
            _compiled([line])
            out.append((number, line, None))
        except Exception as err:  # pathspec's own errors, and the regex engine's beneath it
            out.append((number, line, str(err) or type(err).__name__))
    return out


def check_afiignore(data: bytes) -> None:
    """Refuse ``.afiignore`` bytes that are not all gitignore patterns (or too many of them to read)."""
    if len(data) > AFIIGNORE_MAX_BYTES:
        raise InvalidPath(f"{AFIIGNORE} holds at most {AFIIGNORE_MAX_BYTES // 1024} KiB of patterns",
                          path=f"/files/{AFIIGNORE}")  # fmt: skip
    if b"\x00" in data:
        raise InvalidPath(f"{AFIIGNORE} is text: it holds a NUL byte", path=f"/files/{AFIIGNORE}")
    for number, line, problem in _lines(data):
        if problem is not None:
            raise InvalidPath(f"line {number} of {AFIIGNORE} ({line!r}) is not a gitignore pattern: {problem}",
                              path=f"/files/{AFIIGNORE}")  # fmt: skip


def note_text(data: bytes, cap: int) -> str | None:
    """Given a file's first bytes, return the text its note indexes (cut at ``cap`` characters), or
    None when the file is binary (a NUL, or not UTF-8), empty or only whitespace."""
    if b"\x00" in data:
        return None
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        text = decoder.decode(data, final=False)  # a character the read cut in half is left out, not an error
    except UnicodeDecodeError:
        return None
    return text[:cap] if text.strip() else None
