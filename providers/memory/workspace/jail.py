"""The file jail: every workspace path is resolved here before any I/O touches it.

A jailed path is relative to the root. ``..`` segments, absolute paths and NUL bytes are refused;
then no existing component of the path below the root may be a symlink (pointing out of the root or
not), so nothing outside the root is ever reached through the workspace.

:meth:`FileJail.open` opens a file under those rules in one step: on Linux 5.6+ it is one
``openat2`` call with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` relative to the root, so the kernel
refuses a symlink even if one is swapped in between a check and the open. Elsewhere (or where a
seccomp filter refuses ``openat2``) it checks with :meth:`FileJail.resolve` and opens with
``O_NOFOLLOW``. Writes work inside :meth:`FileJail.folder`, a descriptor reached one component at a
time with ``O_NOFOLLOW``, and name their file relative to it (``dir_fd``), so they are race-free too.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from ..fabric.errors import MemoryValidationError

__all__ = ["FileJail", "read_at_most"]

_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the generic number: x86, arm, arm64, riscv, s390, ppc (alpha and mips differ)
_CREATES = os.O_CREAT | getattr(os, "O_TMPFILE", 0)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _load_syscall() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux") or platform.machine().startswith(("alpha", "mips")):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None


class _Openat2:
    """``openat2`` through libc's ``syscall``, once a first probe has shown that the kernel allows it."""

    def __init__(self) -> None:
        self._syscall = _load_syscall()
        self._probed = False
        self._lock = threading.Lock()

    def usable(self, dir_fd: int) -> bool:
        """Whether openat2 works here; the first call probes it on ``dir_fd`` (the answer then holds)."""
        if self._syscall is None or self._probed:
            return self._syscall is not None
        with self._lock:
            if self._syscall is not None and not self._probed:
                try:
                    os.close(self._open(dir_fd, ".", os.O_PATH | os.O_DIRECTORY, 0))
                except OSError as err:
                    if err.errno not in _UNSUPPORTED:
                        raise  # EMFILE, ENOMEM: this call fails; the next one probes again
                    self._syscall = None
                self._probed = True
        return self._syscall is not None

    def __call__(self, dir_fd: int, relative: str, flags: int, mode: int) -> int:
        """Open ``relative`` beneath ``dir_fd`` following no symlink (:meth:`usable` must be true)."""
        return self._open(dir_fd, relative, flags, mode)

    def _open(self, dir_fd: int, relative: str, flags: int, mode: int) -> int:
        assert self._syscall is not None
        creates = flags & os.O_CREAT or (flags & _CREATES) == _CREATES  # O_TMPFILE includes O_DIRECTORY
        flags |= os.O_CLOEXEC | getattr(os, "O_LARGEFILE", 0)  # glibc's open() adds O_LARGEFILE; a raw call must
        how = _OpenHow(flags, mode if creates else 0, _JAILED)
        fd = int(
            self._syscall(
                ctypes.c_long(_SYS_OPENAT2),
                ctypes.c_int(dir_fd),
                ctypes.c_char_p(os.fsencode(relative)),
                ctypes.byref(how),
                ctypes.c_size_t(ctypes.sizeof(how)),
            )
        )
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), relative)
        return fd


_JAILED = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
_FOLDER = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC
# An older kernel (ENOSYS), a seccomp filter (EPERM), flags or a struct this kernel does not know.
_UNSUPPORTED = (errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG)
_openat2 = _Openat2()


class FileJail:
    """Resolves relative paths inside ``root``; refuses anything that could leave it."""

    def __init__(self, root: str | os.PathLike[str], *, space: str | None = None, create: bool = True) -> None:
        """Jail paths in ``root``; with ``space``, in the folder ``root/space``, which must then be a real
        folder (never a symlink) directly beneath ``root``, checked again at every use.

        Raises:
            MemoryValidationError: ``root`` is not a directory, or ``space`` is not one plain name.
        """
        path = Path(root).expanduser()
        if create:
            path.mkdir(parents=True, exist_ok=True)
        if not path.is_dir():
            raise MemoryValidationError(f"the workspace root {str(path)!r} is not a directory")
        base = os.path.realpath(path)
        self._space = space
        if space is None:
            self._base_text = os.path.dirname(base)
            self.root = Path(base)
        else:
            if not space or "/" in space or space in (".", "..") or "\x00" in space:
                raise MemoryValidationError(f"a space folder is one plain name, not {space!r}")
            self._base_text = base
            self.root = Path(base, space)
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(self.root, 0o777)
        self._root_text = str(self.root)

    def _open_root(self, flags: int = _FOLDER) -> int:
        """Open the jail's own folder; a space folder is reached without following a symlink.

        Raises:
            MemoryValidationError: the space folder is a symlink or not a folder.
            FileNotFoundError: it is missing.
        """
        if self._space is None:
            return os.open(self._root_text, flags | os.O_CLOEXEC)
        base = os.open(self._base_text, _FOLDER)
        try:
            fd = os.open(self._space, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=base)
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.ENOTDIR):
                raise self._space_refused() from None
            raise
        finally:
            os.close(base)
        if not stat.S_ISDIR(os.fstat(fd).st_mode):  # O_PATH | O_NOFOLLOW may hand back the link itself
            os.close(fd)
            raise self._space_refused()
        return fd

    def _space_refused(self) -> MemoryValidationError:
        # named as the tree and the operator know it, never by its place on the host: an error reaches callers
        return MemoryValidationError(
            f"the space folder {self._space!r} is not a real folder beneath the workspace root "
            "(a symlink or a file is there): the workspace refuses to use it"
        )

    def root_stat(self) -> os.stat_result:
        """The stat of the jail's own folder (reached as :meth:`folder` reaches it); a space folder
        not made yet (nothing was ever written) shows as the workspace root's stat, an empty folder."""
        try:
            fd = self._open_root()
        except FileNotFoundError:
            if self._space is None:
                raise
            return os.stat(self._base_text)
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)

    def ensure_root(self) -> None:
        """Make the space's folder if it is missing (the first write of a space makes it; reads never do)."""
        if self._space is None:
            return
        base = os.open(self._base_text, _FOLDER)
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(self._space, 0o777, dir_fd=base)
        finally:
            os.close(base)

    @property
    def root_exists(self) -> bool:
        """Whether the jail's folder exists (a space's is made by its first write)."""
        try:
            os.close(self._open_root())
        except FileNotFoundError:
            return False
        except MemoryValidationError:  # there, but refused (a symlink): the next use says so
            return True
        return True

    def is_root(self, relative: str) -> bool:
        """Whether ``relative`` names the jail's own folder (``""``, ``"."``, ``"./"``)."""
        return not self._parts(relative)

    def _parts(self, relative: str) -> list[str]:
        if not isinstance(relative, str):
            raise MemoryValidationError("a workspace path must be a string")
        if "\x00" in relative:
            raise MemoryValidationError("the workspace path contains a NUL byte")
        if relative.startswith("/"):
            raise MemoryValidationError(f"absolute paths are refused: {relative!r} must be relative to the root")
        try:
            os.fsencode(relative)
        except UnicodeEncodeError:
            raise MemoryValidationError(f"the workspace path is not valid text: {relative!r}") from None
        parts = [p for p in relative.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise MemoryValidationError(f"'..' is refused in workspace paths: {relative!r}")
        return parts

    def resolve(self, relative: str) -> Path:
        """Given a path relative to the root (``""`` or ``"."`` is the root), return the real path.

        Raises:
            MemoryValidationError: absolute, ``..``, NUL, not text, a symlink on the way.
            OSError: a component could not be examined (``PermissionError``, ``ENAMETOOLONG``).
        """
        parts = self._parts(relative)
        try:
            os.close(self._open_root())
        except FileNotFoundError:  # the space's folder is not made yet: nothing below it exists either
            return Path(self._root_text, *parts)
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
                raise self.symlink_refused(relative)
            if not stat.S_ISDIR(mode):
                break
        return Path(self._root_text, *parts)

    def open(self, relative: str, flags: int, mode: int = 0o644) -> int:
        """Open ``relative`` inside the root following no symlink anywhere on the way; return the fd.

        Raises:
            MemoryValidationError: as :meth:`resolve`, or a symlink met while opening.
            OSError: as :func:`os.open` would (``FileNotFoundError``, ``IsADirectoryError``, ...).
            ValueError: ``O_PATH`` was asked (it could name a symlink itself).
        """
        if flags & os.O_PATH:
            raise ValueError("FileJail.open opens files to use them; O_PATH is not offered")
        parts = self._parts(relative)
        if not parts:
            return self._open_root(flags)
        root_fd = self._open_root()
        try:
            if _openat2.usable(root_fd):
                try:
                    return _openat2(root_fd, "/".join(parts), flags, mode)
                except OSError as err:
                    if err.errno in (errno.ELOOP, errno.EXDEV):
                        raise self.symlink_refused(relative) from None
                    raise
        finally:
            os.close(root_fd)
        with self.folder("/".join(parts[:-1])) as folder:  # no openat2: the same walk the writes use
            try:
                return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=folder)
            except OSError as err:
                if err.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(folder, parts[-1]):
                    raise self.symlink_refused(relative) from None
                raise

    def normal(self, relative: str) -> str:
        """Given a path relative to the root, return it without empty or ``.`` segments.

        Raises:
            MemoryValidationError: as :meth:`resolve`.
        """
        return "/".join(self._parts(relative))

    def split(self, relative: str) -> tuple[str, str]:
        """Given a path relative to the root, return (its folder, its name); the root is ``("", "")``.

        Raises:
            MemoryValidationError: as :meth:`resolve`.
        """
        parts = self._parts(relative)
        return ("/".join(parts[:-1]), parts[-1]) if parts else ("", "")

    @contextlib.contextmanager
    def folder(self, relative: str, *, create: bool = False) -> Iterator[int]:
        """Yield a descriptor of the folder ``relative`` (the root for ``""``) for ``dir_fd`` calls.

        The walk opens one component at a time from the root with ``O_NOFOLLOW``, so no symlink is
        followed even one swapped in meanwhile, and every ``*at`` call made with the descriptor stays
        inside. ``create`` makes the folders that are missing on the way (as the umask allows).

        Raises:
            MemoryValidationError: as :meth:`resolve`, or a symlink on the way.
            FileNotFoundError: a folder on the way is missing (and ``create`` is false).
            NotADirectoryError: a component on the way is a file.
        """
        parts = self._parts(relative)
        fd = self._open_root()
        try:
            for depth, part in enumerate(parts, 1):
                child = self._step(fd, part, "/".join(parts[:depth]), create=create)
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    def make_folders(self, relative: str) -> None:
        """Create the folder ``relative`` and the ones missing on the way, never through a symlink.

        Raises:
            as :meth:`folder`.
        """
        with self.folder(relative, create=True):
            pass

    def _step(self, fd: int, part: str, so_far: str, *, create: bool) -> int:
        """Open the folder ``part`` of ``fd`` without following a symlink (made first when missing and asked)."""
        try:
            return os.open(part, _FOLDER | os.O_NOFOLLOW, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise
        except NotADirectoryError:
            if _is_link(fd, part):
                raise self.symlink_refused(so_far) from None
            raise
        with contextlib.suppress(FileExistsError):
            os.mkdir(part, 0o777, dir_fd=fd)
        return self._step(fd, part, so_far, create=False)

    def symlink_refused(self, relative: str) -> MemoryValidationError:
        """The refusal of a symlink at (or on the way to) ``relative``, saying when it leads outside."""
        where = ""
        with contextlib.suppress(OSError, ValueError):  # the link may change or vanish meanwhile
            real = os.path.realpath(os.path.join(self._root_text, *self._parts(relative)))
            if real != self._root_text and not real.startswith(self._root_text + os.sep):
                where = " (it leads outside the workspace root)"
        return MemoryValidationError(f"symlinks are refused in the workspace: {relative!r}{where}")


def _is_link(folder: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def read_at_most(fd: int, limit: int) -> bytes:
    """Read from ``fd`` until end of file or ``limit`` bytes, whichever comes first."""
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
