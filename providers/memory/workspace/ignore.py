"""Which workspace files become memory notes: text files, less the paths a person would not recall.

Every file under ``/files`` is stored, listed and greppable. Only some are also a ``file`` note that
semantic recall serves: a repository's ``.git/`` objects, a build's caches or an editor's swap files
would answer "how do we deploy?" with ``.git/index``. A path is left out when :data:`DEFAULT_IGNORED`
or the workspace's own ``/files/.afiignore`` (gitignore syntax, read by pathspec; a ``!`` line
brings a default back) says so, and a file is left out when it is binary, empty or only whitespace.
"""

from __future__ import annotations

import codecs
import threading
from collections.abc import Callable

import pathspec

__all__ = ["AFIIGNORE", "DEFAULT_IGNORED", "IgnoreRules", "note_text"]

AFIIGNORE = ".afiignore"
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
    lines = list(DEFAULT_IGNORED)
    if source:
        lines += source.decode("utf-8", "replace").splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines)


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
