"""The file jail: every workspace path is resolved here before any I/O touches it.

A jailed path is relative to the root. ``..`` segments, absolute paths and NUL bytes are refused;
then no existing component of the path below the root may be a symlink (pointing out of the root or
not), so nothing outside the root is ever reached through the workspace.

:meth:`FileJail.open` opens a file under those rules in one step: on Linux 5.6+ it is one
``openat2`` call with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` relative to the root, so the kernel
refuses a symlink even if one is swapped in between a check and the open. Elsewhere (or where a
seccomp filter refuses ``openat2``) it checks with :meth:`FileJail.resolve` and opens with
``O_NOFOLLOW``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
import sys
from collections.abc import Callable
from pathlib import Path

from .errors import MemoryValidationError

__all__ = ["FileJail"]

_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # one number on every architecture that gained openat2 (5.6+), alpha aside


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _load_syscall() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux") or platform.machine() == "alpha":
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None


class _Openat2:
    """``openat2`` through libc's ``syscall``; switches itself off where the kernel lacks or refuses it."""

    def __init__(self) -> None:
        self._syscall = _load_syscall()

    @property
    def available(self) -> bool:
        return self._syscall is not None

    def __call__(self, dir_fd: int, relative: str, flags: int, mode: int) -> int | None:
        """Open ``relative`` beneath ``dir_fd`` following no symlink; ``None`` when openat2 is unusable."""
        if self._syscall is None:
            return None
        how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, _JAILED)
        fd = int(
            self._syscall(
                ctypes.c_long(_SYS_OPENAT2),
                ctypes.c_int(dir_fd),
                ctypes.c_char_p(os.fsencode(relative)),
                ctypes.byref(how),
                ctypes.c_size_t(ctypes.sizeof(how)),
            )
        )
        if fd >= 0:
            return fd
        code = ctypes.get_errno()
        if code in (errno.ENOSYS, errno.EPERM, errno.E2BIG):  # old kernel, seccomp, another struct size
            self._syscall = None
            return None
        raise OSError(code, os.strerror(code), relative)


_JAILED = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
_openat2 = _Openat2()


class FileJail:
    """Resolves relative paths inside ``root``; refuses anything that could leave it."""

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True) -> None:
        path = Path(root).expanduser()
        if create:
            path.mkdir(parents=True, exist_ok=True)
        if not path.is_dir():
            raise MemoryValidationError(f"the workspace root {str(path)!r} is not a directory")
        self.root = Path(os.path.realpath(path))
        self._root_text = str(self.root)

    def _parts(self, relative: str) -> list[str]:
        if not isinstance(relative, str):
            raise MemoryValidationError("a workspace path must be a string")
        if "\x00" in relative:
            raise MemoryValidationError("the workspace path contains a NUL byte")
        if relative.startswith("/"):
            raise MemoryValidationError(f"absolute paths are refused: {relative!r} must be relative to the root")
        parts = [p for p in relative.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise MemoryValidationError(f"'..' is refused in workspace paths: {relative!r}")
        return parts

    def resolve(self, relative: str) -> Path:
        """Given a path relative to the root (``""`` or ``"."`` is the root), return the real path.

        Raises:
            MemoryValidationError: absolute, ``..``, NUL, a symlink on the way, or outside the root.
        """
        parts = self._parts(relative)
        # The root is canonical, so the path is its own real path exactly when no existing component
        # below the root is a symlink: one lstat per component, stopping where the path ends on disk.
        current = self._root_text
        for part in parts:
            current = f"{current}/{part}"
            try:
                mode = os.lstat(current).st_mode
            except (FileNotFoundError, NotADirectoryError):
                break
            if stat.S_ISLNK(mode):
                raise self._symlink_refused(relative, current)
            if not stat.S_ISDIR(mode):
                break
        return Path(self._root_text, *parts)

    def open(self, relative: str, flags: int, mode: int = 0o644) -> int:
        """Open ``relative`` inside the root following no symlink anywhere on the way; return the fd.

        Raises:
            MemoryValidationError: as :meth:`resolve`, or a symlink met while opening.
            OSError: as :func:`os.open` would (``FileNotFoundError``, ``IsADirectoryError``, ...).
        """
        parts = self._parts(relative)
        if parts and _openat2.available:
            root_fd = os.open(self._root_text, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                fd = _openat2(root_fd, "/".join(parts), flags, mode)
            except OSError as err:
                if err.errno in (errno.ELOOP, errno.EXDEV):
                    raise self._symlink_refused(relative, os.path.join(self._root_text, *parts)) from None
                raise
            finally:
                os.close(root_fd)
            if fd is not None:
                return fd
        return os.open(self.resolve(relative), flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)

    def _symlink_refused(self, relative: str, at: str) -> MemoryValidationError:
        real = os.path.realpath(at)
        inside = real == self._root_text or real.startswith(self._root_text + os.sep)
        where = "" if inside else " (it leads outside the workspace root)"
        return MemoryValidationError(f"symlinks are refused in the workspace: {relative!r}{where}")

    def relative(self, target: Path) -> str:
        """Given a path inside the root, return it relative to the root (POSIX separators)."""
        return target.relative_to(self.root).as_posix() if target != self.root else ""
