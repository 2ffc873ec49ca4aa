"""The memory fabric end to end, network-free: ``python examples/memory_fabric.py [--db FILE]``.

Walks through what docs/memory-fabric.md describes: notes of each kind, folding (the
same note rewritten in place), supersession (a changed fact retires the old row), the attach gate,
the context provider, the five governed tools over the provider (jailed to the space's /files), a
file move, and forget.
Each step prints what happened; nothing calls a model or the network.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from afi.provider import Caller
from afi.providers.memory import MemoryNotAttachedError, create_fabric_tools, create_memory_fabric
from afi.providers.memory.fabric.embedders import HashEmbedder
from afi.providers.memory.fabric.repoint import (
    create_deletion_propagator,
    create_fabric_repoint_handler,
    repoint_source,
)
from afi.providers.memory.provider import MemoryProvider


@dataclass
class Session:
    """The least an agent session offers the fabric: an id and its entries."""

    id: str
    log: list[dict[str, Any]] = field(default_factory=list)

    def entries(self) -> list[dict[str, Any]]:
        return self.log


def step(title: str) -> None:
    print(f"\n== {title}")


def main(db: str, root: Path) -> None:
    """Given a store file and a workspace root, run the walk-through, printing each step."""
    provider = MemoryProvider(db, root, embedder=HashEmbedder())
    agent = Caller(principal="agent", space="default")
    files = root / agent.space  # the space's /files on disk
    memory = provider.fabric(agent.space).memory
    # The hash embedder scores "…metric units" against "…metric units and Celsius" at 0.816 (4 of 6
    # tokens shared), so the fold threshold sits just below it for the supersession step to show.
    fabric = create_memory_fabric(memory, consolidate={"threshold": 0.8}, linker={"enabled": True, "top_k": 3})

    step("remember: a fact, a procedure, a working block")
    prefs = fabric.remember(kind="fact", content="User prefers metric units", tags=["prefs"])
    deploy = fabric.remember(kind="procedure", content="Deploy via canary first")
    core = fabric.remember(kind="working", block="core", content="Prefers terse output")
    print(f"fact {prefs.id}: {prefs.content!r} tags={prefs.tags}")
    print(f"procedure {deploy.id}: {deploy.content!r}")
    print(f"working block {core.block!r}: {core.content!r}")

    step("folding: the same note again is rewritten in place, annotations unioned")
    repeated = fabric.remember(kind="fact", content="User prefers metric units", keywords=["units"])
    print(f"same id: {repeated.id == prefs.id} ({repeated.id}); keywords={repeated.keywords} tags={repeated.tags}")

    step("supersession: a changed fact retires the old row and points back to it")
    changed = fabric.remember(kind="fact", content="User prefers metric units and Celsius")
    old = next(n for n in fabric.notes(include_invalid=True) if n.id == prefs.id)
    print(f"new {changed.id} supersedes {changed.supersedes}; old row valid_to={old.valid_to}")

    step("recall: ranked hits with a parallel explain row; procedures only when asked")
    result = fabric.recall(
        "preferred units",
        scoring={"recency_weight": 0.3, "importance_weight": 0.2, "half_life_ms": 7 * 86_400_000},
        budget=400,
    )
    for hit, why in zip(result.hits, result.explain, strict=True):
        print(f"  {hit.id} [{hit.kind}] score={why.score:.3f} link={why.link} valid={why.valid}: {hit.content}")
    procedures = fabric.recall("canary deploy", kinds=["procedure"]).hits
    print(f"untyped recall returns no procedure: {all(h.kind != 'procedure' for h in result.hits)}; "
          f"kinds=['procedure'] finds: {[h.content for h in procedures]}")  # fmt: skip

    step("the attach gate: tools refuse a session that was not attached")
    # the tools' effects are the provider's verbs for the agent; this fabric is their gate
    tools = {tool.name: tool for tool in create_fabric_tools(provider, agent, gate=fabric)}
    print("tools:", list(tools))
    session = Session("session-1")
    try:
        tools["memory.recall"].run(session, {"query": "units"})
    except MemoryNotAttachedError as err:
        print(f"before attach: refused ({err.code}): {err.message}")
    attached = fabric.attach(session)
    print(f"attached: {fabric.attached}; linker enabled: {attached.settings.linker.enabled}")

    step("the context provider: working block and semantic notes, tagged for injection")
    for block in attached.context_provider.blocks("units"):
        print(f"  [{block['type']}] {block['content']}")

    step("tools: insert into a file under the jail, view it, read it, recall it")
    inserted = tools["memory.insert"].run(session, {"path": "runbooks/deploy.md", "text": "Canary for 10 minutes"})
    tools["memory.insert"].run(session, {"path": "runbooks/deploy.md", "text": "Then roll out to all regions"})
    print(f"insert: {inserted}")
    print(f"view runbooks: {tools['memory.view'].run(session, {'path': 'runbooks'})['entries']}")
    print(f"read: {tools['memory.read'].run(session, {'path': 'runbooks/deploy.md'})['text']!r}")
    found = tools["memory.recall"].run(session, {"query": "roll out regions", "kinds": ["file"]})
    print(f"recall file notes: {[(h['path'], h['content']) for h in found['hits']]}")
    try:
        tools["memory.read"].run(session, {"path": "../outside.md"})
    except Exception as err:  # the jail refuses before any I/O
        print(f"read ../outside.md: refused ({getattr(err, 'code', '?')})")

    step("following the file: a move repoints the note, a delete tombstones it")
    handler = create_fabric_repoint_handler(memory)
    (files / "runbooks" / "deploy.md").rename(files / "runbooks" / "release.md")
    moved = repoint_source(memory, "runbooks/deploy.md", "runbooks/release.md", handlers=[handler])
    note = fabric.find_file("runbooks/release.md")
    print(f"moved {moved} note(s); {note.id if note else None} now at runbooks/release.md")
    (files / "runbooks" / "release.md").unlink()
    retired = create_deletion_propagator(memory, handlers=[handler]).propagate("runbooks/release.md")
    print(f"deleted the file: {retired} note(s) tombstoned; recall finds it: "
          f"{bool(fabric.recall('roll out regions', kinds=['file']).hits)}")  # fmt: skip

    step("forget: a note by id, a block by label; detach closes the gate")
    print(f"forget {changed.id}: {tools['memory.forget'].run(session, {'id': changed.id})}")
    print(f"forget block core: {tools['memory.forget'].run(session, {'block': 'core'})}")
    print(f"recall 'preferred units' now: {[h.content for h in fabric.recall('preferred units').hits]}")
    attached.detach()
    print(f"attached after detach: {fabric.attached}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None, help="SQLite store file (default: one in a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="afi-example-") as tmp:
        main(args.db or str(Path(tmp) / "example.db"), Path(tmp) / "files")
