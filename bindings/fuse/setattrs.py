"""What ``setattr`` changes: a file's size (truncate), and the mode, which is the tree's.

A mode is what the tree gives (0644, 0444 where read-only; folders 0755 or 0555): asking for the mode
shown changes nothing and succeeds (``cp -p``, ``install -m 644``), any other is EPERM, never a 0 for a
change not made. This holds for the workspace files under ``/files`` too: AFI has no verb that sets a
mode, so the mount cannot apply one.
"""

from __future__ import annotations

import errno
import stat
from typing import TYPE_CHECKING

from .base import fuse_error, log
from .handles import WriteHandle
from .nodes import SEARCH_PATH, Node

if TYPE_CHECKING:
    from .ops import AfiFS

__all__ = ["change_mode", "truncate"]


async def change_mode(fs: AfiFS, node: Node, mode: int) -> None:
    """chmod: succeed for the mode shown; refuse any other (EPERM; EROFS on a read-only mount)."""
    shown = fs._attrs(node, await fs.entries.get(node.path)).st_mode
    if stat.S_IMODE(mode) != stat.S_IMODE(shown):
        fs._may_change()
        log.info("%s: chmod %o refused: modes are the tree's, not set through the mount", node.path, mode & 0o7777)
        raise fuse_error(errno.EPERM)


async def truncate(fs: AfiFS, node: Node, size: int, fh: int | None) -> None:
    """Cut or zero-extend ``node``'s file to ``size`` bytes (in the open handle ``fh``'s buffer when given)."""
    if node.path == SEARCH_PATH:
        return  # `> /.afi/search` truncates nothing: the request lives in the handle
    if size > fs.max_file:
        raise fuse_error(errno.EFBIG)
    fs._may_change(await fs.entries.get(node.path))
    handle = fs.handles.get(fh) if fh is not None else None
    await fs.contents.truncate(node, size, handle if isinstance(handle, WriteHandle) else None)
