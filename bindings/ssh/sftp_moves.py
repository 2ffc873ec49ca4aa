"""Renames over SFTP, the way editors save: a memory-only temp file renamed onto a note writes the note.

A memory-only file (:mod:`.sftp_local`) renamed onto a name the provider stores is written there,
whole, with one ``write``; renamed onto another refused name it stays in memory under that name. A
stored file is moved by the provider; moving one onto a refused name stays a refusal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from afi.errors import AfiError, Conflict, InvalidPath

from ..offload import offload
from .sftp_local import LocalFile

if TYPE_CHECKING:
    from .sftp import AfiSFTPServer

__all__ = ["move"]


async def move(server: AfiSFTPServer, source: str, destination: str, *, overwrite: bool) -> None:
    """Move ``source`` to ``destination`` (``overwrite``: over an existing one).

    Raises:
        AfiError: the provider's refusal, or ``conflict`` when ``destination`` exists and may not be replaced.
    """
    await server.commit_pending(source)  # sshfs may send a file's CLOSE after the rename that follows it
    local = server.locals.get(source)
    if local is None:
        if not overwrite and destination in server.locals:
            raise Conflict("the file exists", path=destination)
        await offload(server.provider.move, server.caller, source, destination, overwrite=overwrite)
        return
    await _store(server, source, local, destination, overwrite=overwrite)


async def _store(server: AfiSFTPServer, source: str, local: LocalFile, destination: str, *, overwrite: bool) -> None:
    """Write memory-only ``source`` at ``destination``, or keep it in memory there when that name is refused too."""
    try:
        await offload(server.provider.write, server.caller, destination, local.data, create_only=not overwrite)
    except InvalidPath as err:
        if not await _name_refused(server, destination):  # what it holds is refused (an empty note), not the name
            raise
        if not overwrite and destination in server.locals:
            raise Conflict("the file exists", path=destination) from None
        server.locals.rename(source, destination, reason=err.message)
        return
    server.locals.pop(source)


async def _name_refused(server: AfiSFTPServer, where: str) -> bool:
    """Whether the provider refuses ``where`` as a name (its ``stat`` says invalid_path, not not_found)."""
    try:
        await offload(server.provider.stat, server.caller, where)
    except InvalidPath:
        return True
    except AfiError:
        return False
    return False
