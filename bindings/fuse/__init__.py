"""The FUSE binding: the filesystem operations (:class:`AfiFS`) and the mount that serves them."""

from .held import HeldFolder
from .mount import MountError, check_mountpoint, serve_mount
from .ops import AfiFS

__all__ = ["AfiFS", "HeldFolder", "MountError", "check_mountpoint", "serve_mount"]
