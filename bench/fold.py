"""Consolidation's ways to find a near-duplicate, side by side: the SimHash bands beside the searches before them.

``python -m bench.fold [--quick] [--notes N] [--store PATH] [--results-dir DIR]``. N notes of about 200
characters (``bench.engines``' corpus) are remembered into a SQLite store (with ``--store``, built there
once and measured in a copy: a store written by code before the bands is banded by the run, timed),
then copied into PostgreSQL (``afi db copy``). Measured, on SQLite, with the fold reading the
**vectors** exactly (what a scope of up to ``FOLD_EXACT_ROWS`` notes did), with the **word index**
naming the candidates (past it), and with the **bands** (a scope of 2,000 notes or more, its rows all
banded); the search a store of a sentence embedder makes (the **words**, scored by their bags) without
and with the bands; on PostgreSQL, the **HNSW** graph and the bands:

- 400 edited copies of stored notes (a word dropped, replaced, added or two swapped) and 400 new notes
  go through the fold search: how many copies find their original, how many new notes find anything,
  and the search's p50;
- 300 new notes are remembered with consolidation, each its own transaction (p50 and notes a second),
  then 2,000 more by ``remember_many``, 500 a batch (notes a second), and 2,000 more with each note of
  a batch searched on its own, one after the other (the batch before its searches went together).

A sentence embedder's store is measured on this store's rows: its fold reads the words (bags of words
kept with the bands, or made from the texts), and the vectors it makes after each write are recall's
alone, so its searches and its writes are those of this store folding by its words.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import sqlite3
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


def _mode(fabric: Any, copies: list[tuple[str, str]], new: list[str], fresh: list[str], *,
          graded: list[tuple[str, str, str]], words: bool = False, singles: int = 0) -> dict[str, Any]:  # fmt: skip
    """The fold's measures in the fabric's present mode (``words``: the search and the writes of a store of
    a sentence embedder, by the bags of words, on this store's rows)."""
    from afi.providers.memory.fabric.consolidate import _by_words, fold_candidates
    from afi.providers.memory.fabric.store import iso_now

    memory = fabric.memory
    threshold, now = fabric.settings.threshold, iso_now()
    samples: list[float] = []

    def nearest(text: str) -> str | None:
        embedding = memory.embedder.embed([text])[0]
        started = time.perf_counter()
        with memory.store.read():
            if words:
                found = _by_words(memory, "fact", text, now, 8, threshold, neighbours=False)
            else:
                found = fold_candidates(memory, "fact", text, embedding, now, 8, threshold=threshold,
                                        neighbours=False)  # fmt: skip
        samples.append((time.perf_counter() - started) * 1000)
        return found[0].note.id if found and found[0].cosine >= threshold else None

    for text, _ in copies:  # warm: the word index's term counts are cached as a running server has them
        nearest(text)
    samples.clear()
    found_original = sum(nearest(text) == original for text, original in copies)
    new_folded = sum(nearest(text) is not None for text in new)
    out: dict[str, Any] = {
        "edited_copies_found": found_original,
        "new_notes_folded": new_folded,
        "fold_search_p50_ms": round(percentile(samples, 50), 3),
    }
    found: dict[str, list[int]] = {bucket: [0, 0] for bucket in GRADES}
    for text, original, bucket in graded:
        found[bucket][0] += nearest(text) == original
        found[bucket][1] += 1
    out["graded_copies_found"] = {bucket: f"{hit}/{tried}" for bucket, (hit, tried) in found.items()}
    with _as_sentence_store(fabric) if words else contextlib.nullcontext():
        return {**out, **_writes(fabric, fresh, singles)}


def _writes(fabric: Any, fresh: list[str], singles: int) -> dict[str, Any]:
    """Single remembers (p50, notes a second), then half the rest by ``remember_many`` as it is and half
    with each note of a batch searched on its own (the batch before its searches were made together)."""
    times: list[float] = []
    for text in fresh[:singles]:
        started = time.perf_counter()
        fabric.remember(kind="fact", content=text)
        times.append((time.perf_counter() - started) * 1000)
    half = singles + (len(fresh) - singles) // 2
    rates = {}
    for key, together, batch in (("remember_many_per_s", True, fresh[singles:half]),
                                 ("remember_many_one_by_one_per_s", False, fresh[half:])):  # fmt: skip
        fabric.fold_together = together
        started = time.perf_counter()
        for at in range(0, len(batch), BATCH):
            fabric.remember_many([{"kind": "fact", "content": text} for text in batch[at : at + BATCH]])
        rates[key] = round(len(batch) / (time.perf_counter() - started), 1)
    fabric.fold_together = True
    return {
        "remember_p50_ms": round(percentile(times, 50), 2),
        "remember_per_s": round(len(times) / (sum(times) / 1000), 1),
        **rates,
    }


@contextlib.contextmanager
def _as_sentence_store(fabric: Any) -> Any:
    """Writes go as in a store of a sentence embedder, on this store of the hash embedder: the fold reads
    the bags of words (kept with the bands, or made from the texts), and each note is committed without
    its vector, which a thread makes after the write (decision 0023; the hash embedder's, made in
    microseconds, where a sentence model would take milliseconds of the machine meanwhile). On leaving,
    the vectors still to make are made and the thread stopped."""
    from afi.providers.memory.fabric import batch_fold, consolidate
    from afi.providers.memory.fabric import memory as memory_module

    modules = (consolidate, batch_fold, memory_module)
    saved = [module.bags_of_words for module in modules]
    for module in modules:
        module.bags_of_words = lambda embedder: False  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, original in zip(modules, saved, strict=True):
            module.bags_of_words = original  # type: ignore[attr-defined]
        trailing, fabric.memory._trailing = fabric.memory._trailing, None
        if trailing is not None:
            trailing.close()  # makes the vectors this process's writes left to make


def _cell(value: Any) -> Any:
    return " · ".join(f"{key}: {found}" for key, found in value.items()) if isinstance(value, dict) else value


# near-duplicates by how near: the cosine of their bags of words to the original's
GRADES = ("0.85-0.88", "0.88-0.92", "0.92-1")


def _graded(originals: list[str], ids: dict[str, str], rng: random.Random,
            threshold: float) -> list[tuple[str, str, str]]:  # fmt: skip
    """Copies of the originals edited 2 to 6 times over, kept when at the fold's threshold or above, each
    with its original's id and its grade (the near-duplicates a single edit leaves are all near 1)."""
    from afi.providers.memory import HashEmbedder

    edited = []
    for text in originals:
        copy = text
        for _ in range(rng.randrange(2, 7)):
            copy = _edited(copy, rng)
        edited.append(copy)
    bags = HashEmbedder()
    cosines = (bags.embed(edited) * bags.embed(originals)).sum(axis=1)
    out = []
    for copy, text, cosine in zip(edited, originals, cosines.tolist(), strict=True):
        if cosine >= threshold:
            grade = next(g for g in reversed(GRADES) if cosine >= float(g.split("-")[0]))
            out.append((copy, ids[text], grade))
    return out


def _set_mode(fabric: Any, *, bands: bool, exact_rows: int | None = None) -> None:
    fabric.memory.store.fold_bands = bands
    if exact_rows is not None:
        fabric.memory.index.fold_exact_rows = exact_rows


def _catch_up(fabric: Any) -> dict[str, Any]:
    """Band every row still to band (a store made before the bands); return how many and the seconds."""
    started = time.perf_counter()
    rows = fabric.memory.store.catch_up_bands(fabric.memory.scope)
    return {"rows": rows, "s": round(time.perf_counter() - started, 3)}


def run(*, quick: bool = False, notes: int | None = None, store: Path | None = None,
        results_dir: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """Build (or copy the kept) store, measure every way; print the table, write the JSON, return it."""
    from afi.providers.memory import create_memory_fabric
    from afi.providers.memory.fabric.memory import space_memory

    n = notes or (3_000 if quick else DEFAULT_NOTES)
    probes = 60 if quick else PROBES
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "afi.db"
        if store is not None and not store.exists():
            _build(store, n)
        if store is not None:
            shutil.copyfile(store, db)  # measured on a copy: the kept store stays as built
        fabric = create_memory_fabric(space_memory(str(db), "default"))
        corpus = texts(n)
        if store is None:
            _remember_all(fabric, corpus)
        fabric.recall("warm up", top_k=1)
        ids = {row[1]: row[0] for row in _contents(fabric)}
        rng = random.Random(11)
        originals = [text for text in rng.sample(corpus, probes) if text in ids]
        copies = [(_edited(text, rng), ids[text]) for text in originals]
        graded = _graded(originals, ids, rng, fabric.settings.threshold)
        new = texts(probes, seed=123 + n)
        singles, batches = (60, 1) if quick else (300, 4)
        fresh = [texts(singles + 2 * BATCH * batches, seed=seed + n) for seed in range(5, 13)]
        catch_up = {"sqlite": _catch_up(fabric)}
        rows = []
        for name, mode, notes_written in (
            ("sqlite: vectors (exact)", {"bands": False, "exact_rows": 1 << 62}, fresh[0]),
            ("sqlite: word index", {"bands": False, "exact_rows": -1}, fresh[1]),
            ("sqlite: bands", {"bands": True}, fresh[2]),
        ):
            _set_mode(fabric, **mode)  # type: ignore[arg-type]
            rows.append({"fold": name, **_mode(fabric, copies, new, notes_written, graded=graded, singles=singles)})
        for name, bands, notes_written in (("sqlite: words, as a sentence embedder's store", False, fresh[3]),
                                           ("sqlite: bands of words, as a sentence embedder's store", True,
                                            fresh[4])):  # fmt: skip
            _set_mode(fabric, bands=bands)
            rows.append({"fold": name, **_mode(fabric, copies, new, notes_written, graded=graded, words=True,
                                               singles=singles)})  # fmt: skip
        fabric.memory.store.close()
        pg_rows, catch_up["postgresql"] = _postgres(db, copies, new, graded, fresh[5:], singles)
        rows += pg_rows
    columns = sorted({column for row in rows for column in row}, key=lambda c: (c != "fold", list(COLUMNS).index(c)))
    print_table(f"fold search at {n:,} notes ({len(copies)} edited copies, {len(new)} new notes)", columns,
                [[_cell(row.get(c, "")) for c in columns] for row in rows])  # fmt: skip
    for engine, done in catch_up.items():
        print(f"{engine}: {done['rows']:,} rows of the base banded in {done['s']} s")
    by = {row["fold"]: row for row in rows}
    payload: dict[str, Any] = {"notes": n, "edited_copies": len(copies), "new_notes": len(new), "modes": rows,
                               "catch_up": catch_up}  # fmt: skip
    payload["comparisons"] = comparisons(*_comparisons(by, n, len(copies)))
    write_result("fold", payload, results_dir)
    return payload


COLUMNS = ("fold", "edited_copies_found", "graded_copies_found", "new_notes_folded", "fold_search_p50_ms",
           "remember_p50_ms", "remember_per_s", "remember_many_per_s", "remember_many_one_by_one_per_s")  # fmt: skip
BATCH = 500


def _comparisons(by: dict[str, dict[str, Any]], n: int, copies: int) -> list[dict[str, Any]]:
    out = []
    for engine, bands, before in (
        ("SQLite, bands beside the word index", "sqlite: bands", "sqlite: word index"),
        ("SQLite, bands beside the exact search", "sqlite: bands", "sqlite: vectors (exact)"),
        ("PostgreSQL, bands beside the HNSW graph", "postgresql: bands", "postgresql: HNSW"),
        ("a sentence embedder's SQLite store, bands beside the words",
         "sqlite: bands of words, as a sentence embedder's store", "sqlite: words, as a sentence embedder's store"),
    ):  # fmt: skip
        ours, base = by[bands], by[before]
        for metric, unit, better in (("fold_search_p50_ms", "ms", "lower"), ("remember_p50_ms", "ms", "lower"),
                                     ("remember_many_per_s", "notes/s", "higher"),
                                     ("edited_copies_found", "notes", "higher")):  # fmt: skip
            if metric in ours and metric in base:
                label = f"{metric.replace('_', ' ')}, {engine}, {n:,} notes" + (
                    f" (of {copies})" if "copies" in metric else ""
                )
                out.append(comparison(label, unit, better, ours=(bands, ours[metric]), baseline=(before, base[metric])))
    for name in ("sqlite: bands", "sqlite: bands of words, as a sentence embedder's store", "postgresql: bands",
                 "postgresql: bands of words, as a sentence embedder's store"):  # fmt: skip
        row = by[name]
        out.append(comparison(f"remember_many, {name}, the batch's folds searched together beside one by one, "
                              f"{n:,} notes", "notes/s", "higher",
                              ours=("together", row["remember_many_per_s"]),
                              baseline=("one by one", row["remember_many_one_by_one_per_s"])))  # fmt: skip
    return out


def _remember_all(fabric: Any, corpus: list[str]) -> None:
    with fabric.memory.store.write():
        for text in corpus:
            fabric.remember(kind="fact", content=text, consolidate=False)


def _build(store: Path, n: int) -> None:
    """Build the kept store (``bench.engines``' notes) once."""
    from afi.providers.memory import create_memory_fabric
    from afi.providers.memory.fabric.memory import space_memory

    partial = store.with_name(store.name + ".building")
    partial.unlink(missing_ok=True)
    fabric = create_memory_fabric(space_memory(str(partial), "default"))
    _remember_all(fabric, texts(n))
    fabric.memory.store.close()
    with contextlib.closing(sqlite3.connect(partial)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    partial.replace(store)


def _postgres(db: Path, copies: list[tuple[str, str]], new: list[str], graded: list[tuple[str, str, str]],
              fresh: list[list[str]], singles: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """The same measures over the store copied into PostgreSQL (set as ``bench.engines`` sets it), by its
    HNSW graph and by the bands; and the seconds its bands took to catch up."""
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
            catch_up = _catch_up(fabric)
            rows = []
            for name, bands, words, notes_written in (
                ("postgresql: HNSW", False, False, fresh[0]),
                ("postgresql: bands", True, False, fresh[1]),
                ("postgresql: bands of words, as a sentence embedder's store", True, True, fresh[2]),
            ):
                _set_mode(fabric, bands=bands)
                rows.append({"fold": name, **_mode(fabric, copies, new, notes_written, graded=graded, words=words,
                                                   singles=singles)})  # fmt: skip
            return rows, catch_up
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
    parser.add_argument("--store", type=Path, help="a SQLite store to build once and measure copies of")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args()
    run(quick=args.quick, notes=args.notes, store=args.store, results_dir=args.results_dir)
