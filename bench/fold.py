"""Consolidation's ways to find a near-duplicate, side by side: SQLite's two and PostgreSQL's.

``python -m bench.fold [--quick] [--notes N] [--store PATH] [--results-dir DIR]``. N notes of about 200
characters (``bench.engines``' corpus) are remembered into a SQLite store (kept at ``--store`` for the
next run, else a temporary one), then copied into PostgreSQL (``afi db copy``). Measured, on SQLite with
the fold reading the **vectors** exactly (what a scope of up to ``FOLD_EXACT_ROWS`` notes does) and with
the **word index** naming the candidates (past it), and on PostgreSQL, where the **HNSW** graph answers
at every size:

- 400 edited copies of stored notes (a word dropped, replaced, added or two swapped) and 400 new notes
  go through the fold search: how many copies find their original, how many new notes find anything,
  and the search's p50;
- 300 new notes are remembered with consolidation (each its own transaction): notes a second.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from ._common import RESULTS_DIR, comparison, comparisons, percentile, print_table, write_result
from .engines import texts

DEFAULT_NOTES = 100_000
PROBES = 400


def _edited(text: str, rng: random.Random) -> str:
    words = text.split()
    at = rng.randrange(len(words) - 1)  # the last word names the note: kept
    match rng.randrange(4):
        case 0:
            del words[at]
        case 1:
            words[at] = rng.choice(["really", "also", "today", "quite"])
        case 2:
            other = rng.randrange(len(words) - 1)
            words[at], words[other] = words[other], words[at]
        case _:
            words.insert(at, rng.choice(["indeed", "still", "then"]))
    return " ".join(words)


def _mode(fabric: Any, copies: list[tuple[str, str]], new: list[str], fresh: list[str]) -> dict[str, Any]:
    from afi.providers.memory.fabric.consolidate import fold_candidates
    from afi.providers.memory.fabric.store import iso_now

    memory = fabric.memory
    threshold, now = fabric.settings.threshold, iso_now()
    samples: list[float] = []

    def nearest(text: str) -> str | None:
        embedding = memory.embedder.embed([text])[0]
        started = time.perf_counter()
        with memory.store.read():
            found = fold_candidates(memory, "fact", text, embedding, now, 8, threshold=threshold, neighbours=False)
        samples.append((time.perf_counter() - started) * 1000)
        return found[0].note.id if found and found[0].cosine >= threshold else None

    for text, _ in copies:  # warm: the word index's term counts are cached as a running server has them
        nearest(text)
    samples.clear()
    found_original = sum(nearest(text) == original for text, original in copies)
    new_folded = sum(nearest(text) is not None for text in new)
    started = time.perf_counter()
    for text in fresh:
        fabric.remember(kind="fact", content=text)
    return {
        "edited_copies_found": found_original,
        "new_notes_folded": new_folded,
        "fold_search_p50_ms": round(percentile(samples, 50), 3),
        "remember_per_s": round(len(fresh) / (time.perf_counter() - started), 1),
    }


def run(*, quick: bool = False, notes: int | None = None, store: Path | None = None,
        results_dir: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """Build (or reuse) the store, measure both ways; print the table, write the JSON, return it."""
    from afi.providers.memory import create_memory_fabric
    from afi.providers.memory.fabric.memory import space_memory

    n = notes or (3_000 if quick else DEFAULT_NOTES)
    probes = 60 if quick else PROBES
    with tempfile.TemporaryDirectory() as tmp:
        db = store or Path(tmp) / "afi.db"
        reuse = db.exists()
        fabric = create_memory_fabric(space_memory(str(db), "default"))
        corpus = texts(n)
        if not reuse:
            with fabric.memory.store.write():
                for text in corpus:
                    fabric.remember(kind="fact", content=text, consolidate=False)
        fabric.recall("warm up", top_k=1)
        ids = {row[1]: row[0] for row in _contents(fabric)}
        rng = random.Random(11)
        originals = [text for text in rng.sample(corpus, probes) if text in ids]
        copies = [(_edited(text, rng), ids[text]) for text in originals]
        new = texts(probes, seed=123 + n)
        fresh = [texts(probes // 2 + 100, seed=seed + n) for seed in (5, 6, 7)]
        rows = []
        for name, exact_rows, notes_written in (("sqlite: vectors (exact)", 1 << 62, fresh[0]),
                                                ("sqlite: word index", -1, fresh[1])):  # fmt: skip
            fabric.memory.index.fold_exact_rows = exact_rows
            rows.append({"fold": name, **_mode(fabric, copies, new, notes_written)})
        fabric.memory.store.close()
        rows.append({"fold": "postgresql: HNSW", **_postgres(db, copies, new, fresh[2])})
    columns = list(rows[0])
    print_table(f"fold search at {n:,} notes ({len(copies)} edited copies, {len(new)} new notes)", columns,
                [[row[c] for c in columns] for row in rows])  # fmt: skip
    vectors, words, hnsw = rows
    payload: dict[str, Any] = {"notes": n, "edited_copies": len(copies), "new_notes": len(new), "modes": rows}
    exact, by_words = "SQLite: vectors, exact", "SQLite: word index"
    graph = "PostgreSQL: HNSW"
    payload["comparisons"] = comparisons(
        comparison(
            f"fold search p50, {n:,} notes", "ms", "lower",
            ours=(by_words, words["fold_search_p50_ms"]), baseline=(exact, vectors["fold_search_p50_ms"]),
        ),
        comparison(
            f"remember with consolidation, {n:,} notes", "notes/s", "higher",
            ours=(by_words, words["remember_per_s"]), baseline=(exact, vectors["remember_per_s"]),
        ),
        comparison(
            f"edited copies that find their original (of {len(copies)})", "notes", "higher",
            ours=(by_words, words["edited_copies_found"]), baseline=(exact, vectors["edited_copies_found"]),
        ),
        comparison(
            f"edited copies that find their original, PostgreSQL beside SQLite (of {len(copies)})", "notes",
            "higher", ours=(graph, hnsw["edited_copies_found"]), baseline=(by_words, words["edited_copies_found"]),
        ),
    )  # fmt: skip
    write_result("fold", payload, results_dir)
    return payload


def _postgres(db: Path, copies: list[tuple[str, str]], new: list[str], fresh: list[str]) -> dict[str, Any]:
    """The same measures over the store copied into PostgreSQL (set as ``bench.engines`` sets it)."""
    from afi.app.dbcopy import CopyPlan, copy_store
    from afi.providers.memory import create_memory_fabric
    from afi.providers.memory.fabric.memory import space_memory
    from tests.support.postgres import Databases, postgres_server

    from .engines import SERVER_SETTINGS

    with postgres_server(settings=SERVER_SETTINGS) as server_url:
        url = Databases(server_url).fresh()
        copy_store(CopyPlan(db, url, batch=5000), lambda table, done, total: None)
        fabric = create_memory_fabric(space_memory(url, "default"))
        fabric.recall("warm up", top_k=1)
        try:
            return _mode(fabric, copies, new, fresh)
        finally:
            fabric.memory.store.close()


def _contents(fabric: Any) -> list[tuple[str, str]]:
    """Every current fact's (id, content)."""
    with fabric.memory.store.read() as conn:
        return conn.execute("SELECT id, content FROM notes WHERE kind = 'fact' AND status = 'active'").fetchall()  # type: ignore[no-any-return]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--notes", type=int)
    parser.add_argument("--store", type=Path, help="a SQLite store to build once and reuse")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    run(quick=args.quick, notes=args.notes, store=args.store, results_dir=args.results_dir)
