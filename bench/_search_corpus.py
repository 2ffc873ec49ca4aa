"""The corpus of the search benchmark (bench/search.py): N fact notes with planted phrases, built
through the fabric, and the same tree written out as files for ripgrep and grep."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from afi.model import RegexQuery, SearchQuery
from afi.provider import Caller

SEED = 20240611
SPACE = "default"
FIRST_PAGE = 100
GOAL_SPEEDUP = 10.0
GOAL_P50_MS = 10.0
SELECTIVE_EVERY = 200  # 0.5% of the notes carry the selective phrase
BROAD_EVERY = 12  # 8.3% carry the broad one
BATCH = 5000

_SUBJECTS = (
    "The payments team", "Our on-call engineer", "The data platform group", "Maria from support",
    "The mobile squad", "Kenji", "The release manager", "Priya's team", "The infra guild", "Our intern",
    "The security lead", "Tom", "The analytics crew", "The finance office",
)  # fmt: skip
_VERBS = (
    "moved", "reviewed", "postponed", "approved", "documented", "benchmarked", "rolled back", "migrated",
    "split", "archived", "rewrote", "paused", "tested", "cleaned up",
)  # fmt: skip
_OBJECTS = (
    "the search index", "the invoice exporter", "the login service", "the nightly backup",
    "the metrics dashboard", "the onboarding guide", "the billing schema", "the cache layer",
    "the travel budget", "the design review", "the support queue", "the staging cluster",
)  # fmt: skip
_WHEN = (
    "on Monday", "after the outage", "before the quarterly review", "during the offsite", "last sprint",
    "ahead of the launch", "this morning", "at the retro", "over the weekend", "in March",
)  # fmt: skip
_WHY = (
    "because latency doubled", "to cut hosting costs", "so the auditors are happy", "since the vendor changed",
    "after user complaints", "to unblock the mobile release", "", "", "",
)  # fmt: skip


@dataclass(frozen=True)
class SearchCase:
    """One query, spelled for the provider and for rg/grep (``fixed``: a literal, else an ERE)."""

    name: str
    query: SearchQuery
    pattern: str
    fixed: bool
    selective: bool


CASES = (
    SearchCase("selective-exact", "Zephyr warehouse", "Zephyr warehouse", True, True),
    SearchCase("selective-regex", RegexQuery(regex="Zephyr [a-z]+ contract"), "Zephyr [a-z]+ contract", False, True),
    SearchCase("broad-exact", "canary deploy", "canary deploy", True, False),
    SearchCase(
        "broad-regex", RegexQuery(regex="canary deploy of the [a-z]+"), "canary deploy of the [a-z]+", False, False
    ),
)


def _sentence(rng: random.Random) -> str:
    why = rng.choice(_WHY)
    tail = f" {why}" if why else ""
    return f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_WHEN)}{tail}."


def note_text(i: int, rng: random.Random) -> str:
    """Given a note number and a seeded generator, return its content: 1-3 sentences, some planted."""
    sentences = [_sentence(rng) for _ in range(rng.randint(1, 3))]
    if i % BROAD_EVERY == 5:
        sentences.insert(rng.randint(0, len(sentences)), f"{rng.choice(_SUBJECTS)} ran a canary deploy of "
                         f"{rng.choice(_OBJECTS)} {rng.choice(_WHEN)}.")  # fmt: skip
    if i % SELECTIVE_EVERY == 17:
        sentences.append("Legal flagged a clause in the Zephyr warehouse contract renewal.")
    return " ".join(sentences)


def build_store(db: Path, n: int, *, seed: int = SEED) -> None:
    """Given an empty database path, store n fact notes ``n000000``... through the fabric."""
    from afi.providers.memory.fabric.fabric import create_memory_fabric
    from afi.providers.memory.fabric.memory import space_memory

    memory = space_memory(db, SPACE)
    fabric = create_memory_fabric(memory)
    rng = random.Random(seed)
    try:
        for start in range(0, n, BATCH):
            with memory.store.write():  # one transaction per batch; remember's own writes join it
                for i in range(start, min(n, start + BATCH)):
                    fabric.remember(kind="fact", name=f"n{i:06d}", content=note_text(i, rng), consolidate=False)
    finally:
        memory.close()


def export_tree(db: Path, out: Path) -> int:
    """Given a built store, write the tree the provider shows under ``out``; return the file count.

    Reads the ``rendered`` column (the provider serves exactly that text) of the facts valid now, as
    ``facts/<name>.md``: what a search of ``/`` walks (versions under ``/history`` only when named).
    """
    import sqlite3

    from afi.providers.memory.tree.notes_view import now_iso

    (out / "facts").mkdir(parents=True)
    conn = sqlite3.connect(db)
    now = now_iso()
    rows = conn.execute(
        "SELECT id, kind, name, rendered, (valid_from IS NULL OR valid_from <= ?) AND "
        "(valid_to IS NULL OR valid_to > ?) FROM notes "
        "WHERE tenant_id = 'afi' AND resource_id = ? AND thread_id = 'main' AND status = 'active'",
        (now, now, SPACE),
    )
    count = 0
    for _id, kind, name, rendered, valid in rows:
        if valid and name and kind == "fact":
            (out / "facts" / f"{name}.md").write_bytes(rendered.encode())
            count += 1
    conn.close()
    return count


def check_export(provider: Any, caller: Caller, out: Path, *, sample: int = 20, seed: int = SEED) -> None:
    """Given the provider and the exported tree, raise AssertionError unless sampled files read the same."""
    rng = random.Random(seed)
    files = sorted(p for p in out.rglob("*.md"))
    for path in rng.sample(files, min(sample, len(files))):
        rel = "/" + path.relative_to(out).as_posix()
        got = provider.read(caller, rel).data
        if got != path.read_bytes():
            raise AssertionError(f"{rel}: the provider reads other bytes than the exported file")
