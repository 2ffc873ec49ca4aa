"""``import_foreign``: what ``afi import`` runs when its source is not an afi bundle."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from afi.provider import Caller

from ..provider import MemoryProvider
from .claude_memories import read_claude_memories
from .detect import FORMATS, detect, unknown_format
from .markdown import read_markdown, read_obsidian
from .mcp_memory import read_mcp_memory
from .mem0 import read_mem0
from .plan import ImportPlan, ReadLimits
from .report import ImportReport
from .write import check_plan, write_plan

__all__ = ["READERS", "import_foreign"]

Reader = Callable[[Path, ReadLimits], ImportPlan]

READERS: dict[str, Reader] = {
    "markdown": read_markdown,
    "obsidian": read_obsidian,
    "mcp-memory": read_mcp_memory,
    "mem0": read_mem0,
    "claude-memories": read_claude_memories,
}
assert tuple(READERS) == FORMATS


def import_foreign(
    provider: MemoryProvider,
    path: Path,
    *,
    fmt: str | None,
    space: str,
    progress: Callable[[int, int], None] | None = None,
) -> ImportReport:
    """Given a source in a foreign format (``fmt``, or None to detect it), write it into ``space`` as
    its local owner and return what was done.

    The whole source is read and checked first; nothing is written unless all of it can be, and then
    all of it is written in one transaction (a kill -9 midway leaves the store as it was).

    Raises:
        InvalidPath: an unknown format, a source the format does not take, or a bad record (the message
            names the file and line or record).
        TooLarge: a note or file over the store's caps, named.
        Conflict: another import or fork into the space is running.
    """
    path = Path(path).expanduser()
    if fmt is not None and fmt not in READERS:
        raise unknown_format(path, f"unknown format {fmt!r}")
    if fmt is not None and not path.exists():
        raise unknown_format(path, "no such file or folder")
    chosen = fmt or detect(path)
    if chosen in ("mcp-memory", "mem0") and not path.is_file():
        raise unknown_format(path, f"{chosen} takes a JSON file, not a folder")
    if chosen in ("obsidian", "claude-memories") and not path.is_dir():
        raise unknown_format(path, f"{chosen} takes a folder")
    fabric = provider.fabric(space)
    limits = ReadLimits(fabric.memory.limits.max_entry_text_chars, provider.workspace_limits.max_file_bytes)
    plan = READERS[chosen](path, limits)
    check_plan(provider, space, plan)
    report = ImportReport(format=chosen, label=plan.label, skipped=plan.skipped, unresolved=plan.unresolved)
    caller = Caller(principal="local", space=space)
    write = partial(write_plan, provider, caller, plan, report, progress)
    provider.import_whole(caller, write, files=bool(plan.files))  # whole or not at all
    return report
