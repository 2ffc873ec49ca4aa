"""The load bench's store: the corpus's query pools and the 10k-note store every server configuration copies.

Built once through the fabric's fast path (facts and procedures in one transaction,
``consolidate=False``) plus workspace files written through the provider (a tenth of N), then
checkpointed so that a copy of the folder is the whole store.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from ._search_corpus import _OBJECTS, _SUBJECTS, _VERBS, _WHEN, note_text  # the search bench's corpus

__all__ = [
    "COUNTERS",
    "SEED",
    "SPACE",
    "Workload",
    "build_store",
    "checkpoint",
    "exact_queries",
    "regex_queries",
    "semantic_queries",
]

SEED = 20261201
SPACE = "default"
COUNTERS = 4  # the writer's counters: half files, half fact notes

_STEPS = (
    "check the dashboard", "page the on-call engineer", "roll back the release", "rotate the credentials",
    "drain the queue", "restart the worker pool", "file the incident report", "notify the account owner",
    "snapshot the database", "bump the cache version", "rerun the nightly export", "archive the old logs",
)  # fmt: skip
_TOPICS = (
    "a failed deploy", "a billing dispute", "a slow login", "a full disk", "an expired certificate",
    "a stuck migration", "a noisy alert", "a data export request", "a security report", "a vendor outage",
)  # fmt: skip


def exact_queries(rng: random.Random, n: int = 300) -> list[str]:
    """Literal phrases of the corpus: who did what, what was done to what, and planted phrases."""
    pairs = [f"{s} {v}" for s in _SUBJECTS for v in _VERBS] + [f"{v} {o}" for v in _VERBS for o in _OBJECTS]
    pairs += [f"{step} {when}" for step in _STEPS for when in ("before", "after", "while")]
    return [*rng.sample(pairs, n - 4), "Zephyr warehouse", "canary deploy", "an expired certificate", "a full disk"]


def regex_queries(rng: random.Random, n: int = 100) -> list[str]:
    """Regular expressions with a literal to anchor on, some with alternatives and classes."""
    out = []
    for _ in range(n):
        verbs = "|".join(rng.sample(_VERBS, 2))
        match rng.randrange(4):
            case 0:
                out.append(f"{rng.choice(_SUBJECTS)} ({verbs}) the [a-z]+")
            case 1:
                out.append(f"({verbs}) {rng.choice(_OBJECTS)} (on|after|before|during) [a-z ]+")
            case 2:
                out.append(f"canary deploy of {rng.choice(_OBJECTS)}")
            case _:
                out.append(f"[0-9]+\\. {rng.choice(_STEPS)} (before|after|while) an? [a-z]+")
    return out


def semantic_queries(rng: random.Random, n: int = 500) -> list[str]:
    """Questions in the corpus's words, about facts and about procedures."""
    out = []
    for _ in range(n):
        if rng.random() < 0.8:
            who = rng.choice(("who", "which team", "did anyone", "when was it that someone"))
            out.append(f"{who} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_WHEN)}")
        else:
            out.append(f"how do we {rng.choice(_STEPS)} for {rng.choice(_TOPICS)}")
    return out


@dataclass(frozen=True)
class Workload:
    """What the clients ask for: readable paths, folders to list, queries, and the writer's counters."""

    paths: list[str]
    lists: list[str]
    file_counters: list[str]
    note_counters: list[str]
    exact: list[str] = field(default_factory=lambda: exact_queries(random.Random(SEED)))
    regex: list[str] = field(default_factory=lambda: regex_queries(random.Random(SEED)))
    semantic: list[str] = field(default_factory=lambda: semantic_queries(random.Random(SEED)))


def _procedure(i: int, rng: random.Random) -> str:
    steps = rng.sample(_STEPS, k=rng.randint(2, 4))
    lines = [f"{len(steps)} steps for {rng.choice(_TOPICS)}:"]
    lines += [f"{n}. {step} {rng.choice(('before', 'after', 'while'))} {rng.choice(_TOPICS)}" for n, step in
              enumerate(steps, start=1)]  # fmt: skip
    return "\n".join(lines) + f"\n(procedure {i})"


def _file_text(i: int, rng: random.Random) -> str:
    return f"# notes {i}\n\n" + "\n".join(note_text(i * 7 + k, rng) for k in range(rng.randint(3, 8))) + "\n"


def build_store(db: Path, root: Path, notes: int, *, seed: int = SEED) -> Workload:
    """Given an empty database path and workspace root, store ``notes`` notes (70% facts, 20%
    procedures, 10% workspace files, each with its file note) and the writer's counters."""
    from afi.provider import Caller
    from afi.providers.memory.provider import MemoryProvider

    rng = random.Random(seed)
    files = max(1, notes // 10)
    procedures = max(1, notes // 5)
    facts = max(1, notes - files - procedures)
    provider = MemoryProvider(db, root)
    caller = Caller(principal="local", space=SPACE)
    fabric = provider.fabric(SPACE)
    with fabric.memory.store.write():  # one transaction: the base load is not what is measured
        for i in range(facts):
            fabric.remember(kind="fact", name=f"n{i:06d}", content=note_text(i, rng), consolidate=False)
        for i in range(procedures):
            fabric.remember(kind="procedure", name=f"p{i:06d}", content=_procedure(i, rng), consolidate=False)
    paths = [f"/facts/n{i:06d}.md" for i in range(facts)] + [f"/procedures/p{i:06d}.md" for i in range(procedures)]
    for i in range(files):
        path = f"/files/d{i % 10}/f{i:06d}.md"
        provider.write(caller, path, _file_text(i, rng).encode())
        paths.append(path)
    file_counters = [f"/files/load/counter-{k}.txt" for k in range(COUNTERS // 2)]
    note_counters = [f"/facts/load-counter-{k}.md" for k in range(COUNTERS - COUNTERS // 2)]
    for path in file_counters:
        provider.write(caller, path, b"load counter 0\n")
    for path in note_counters:
        provider.write(caller, path, b"load counter 0\n")
    lists = [f"/files/d{k}" for k in range(min(10, files))] + ["/procedures", "/facts"]
    lists += [f"/facts?glob=n{k:04d}*" for k in range(0, max(1, facts // 100), max(1, facts // 1000))]
    fabric.memory.close()
    return Workload(paths, lists, file_counters, note_counters)


def checkpoint(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
