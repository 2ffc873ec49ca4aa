"""Consolidation attacked: writers of one scope in several processes (on both engines), ``kill -9`` in a
write loop, and words that mean something to FTS5's query syntax.

The word-index fold (SQLite past ``fold_exact_rows``) is what most of this attacks: a store here sets
``fold_exact_rows`` to -1, so every fold goes through the word index from the first note, as it does
past a quarter of a million notes in a scope.
"""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from afi.providers.memory import create_memory, create_memory_fabric
from afi.providers.memory.fabric.errors import MemoryLimitError, MemoryValidationError
from afi.providers.memory.fabric.vectors import FOLD_EXACT_ROWS
from tests.support.fold_notes import edited, prose_notes
from tests.support.hostile import Tally

SCOPE = {"tenant_id": "t", "resource_id": "r", "thread_id": "w"}

_WRITER = textwrap.dedent(
    """
    import json, sys
    from afi.providers.memory import create_memory, create_memory_fabric

    memory = create_memory(sys.argv[1], tenant_id="t", resource_id="r", thread_id="w")
    memory.index.fold_exact_rows = int(sys.argv[3])
    fabric = create_memory_fabric(memory)
    for text in json.loads(open(sys.argv[2]).read()):
        note = fabric.remember(kind="fact", content=text)
        print(json.dumps([note.id, text]), flush=True)
    """
)


def _writer(db: str, texts: list[str], plan: Path, exact_rows: int) -> subprocess.Popen[str]:
    plan.write_text(json.dumps(texts))
    env = {"PYTHONPATH": ":".join(sys.path), "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-c", _WRITER, db, str(plan), str(exact_rows)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)


def _rows(db: str | Path, sql: str) -> list[tuple[Any, ...]]:
    memory = create_memory(db, **SCOPE)
    try:
        with memory.store.read() as conn:
            return [tuple(row) for row in conn.execute(sql).fetchall()]
    finally:
        memory.close()


def _current(db: str | Path) -> list[tuple[str, str]]:
    """(id, content) of the scope's current facts: active, not retired by a later version."""
    return _rows(db, "SELECT id, content FROM notes WHERE tenant_id = 't' AND status = 'active' AND valid_to IS NULL")


def _ids(db: str | Path) -> set[str]:
    return {row[0] for row in _rows(db, "SELECT id FROM notes WHERE tenant_id = 't'")}


def _assert_indexes_whole(db: str | Path) -> None:
    """Every active note has its vector; on SQLite, SQLite's own check and FTS5's check of both text
    indexes against the notes they index."""
    assert _rows(db, "SELECT COUNT(*) FROM notes WHERE status = 'active' AND embedding IS NULL") == [(0,)]
    if str(db).startswith("postgresql"):
        return
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for table in ("notes_lexical", "notes_trigram"):
            conn.execute(f"INSERT INTO {table} ({table}, rank) VALUES ('integrity-check', 1)")


def _named(content: str) -> str:
    return content.split()[-1]  # item<i>: edited copies keep it


def _with_word_added(text: str, rng: random.Random) -> str:
    words = text.split()
    words.insert(rng.randrange(len(words) - 1), "indeed")
    return " ".join(words)


@pytest.mark.parametrize("way", ["words", "vectors", "postgresql"])
def test_three_processes_writing_the_same_ideas_keep_one_note_each(
    tmp_path: Path, way: str, request: pytest.FixtureRequest
) -> None:
    """Three processes write the same 200 notes, each in its own order and with 100 copies of its own
    (a word added: any two versions of a note stay near each other): every write is acknowledged and
    kept, and each idea ends as exactly one current note. A writer that waited for the lock folds into
    what is current when it holds it (it used to fold into the version current when it asked)."""
    db = str(request.getfixturevalue("pg_store_url")) if way == "postgresql" else str(tmp_path / "m.db")
    create_memory(db, **SCOPE).close()
    bases = prose_notes(200, seed=21)
    writers = []
    for w in range(3):
        rng = random.Random(100 + w)
        texts = bases + [_with_word_added(text, rng) for text in rng.sample(bases, 100)]
        rng.shuffle(texts)
        writers.append(_writer(db, texts, tmp_path / f"plan{w}.json", -1 if way == "words" else FOLD_EXACT_ROWS))
    acknowledged: list[tuple[str, str]] = []
    for writer in writers:
        out, _ = writer.communicate(timeout=600)
        assert writer.returncode == 0
        acknowledged += [tuple(json.loads(line)) for line in out.splitlines()]  # type: ignore[misc]
    current = _current(db)
    per_idea = Counter(_named(content) for _, content in current)
    duplicated = {name: count for name, count in per_idea.items() if count != 1}
    stored = _ids(db)
    print(f"{way}: 3 processes, {len(acknowledged)} writes acknowledged; {len(current)} current notes for "
          f"{len(bases)} ideas; duplicated: {len(duplicated)}")  # fmt: skip
    assert len(acknowledged) == 3 * 300
    assert not [note_id for note_id, _ in acknowledged if note_id not in stored]
    assert not duplicated and len(per_idea) == len(bases)
    _assert_indexes_whole(db)


_LOOP = textwrap.dedent(
    """
    import json, random, sys
    from afi.providers.memory import create_memory, create_memory_fabric
    from tests.support.fold_notes import edited, prose_notes

    memory = create_memory(sys.argv[1], tenant_id="t", resource_id="r", thread_id="w")
    memory.index.fold_exact_rows = -1
    fabric = create_memory_fabric(memory)
    rng = random.Random(7)
    bases = prose_notes(5000, seed=31)
    for i, text in enumerate(bases):
        note = fabric.remember(kind="fact", content=text)
        print(json.dumps([note.id, text]), flush=True)
        if i % 3 == 2:
            copy = edited(bases[rng.randrange(i)], rng)
            note = fabric.remember(kind="fact", content=copy)
            print(json.dumps([note.id, copy]), flush=True)
    """
)


def test_kill_9_in_a_word_path_write_loop_loses_no_acknowledged_note(tmp_path: Path) -> None:
    """A process writing new notes and edited copies through the word index is killed with SIGKILL at
    once after 300 acknowledgements: every acknowledged note is there, the indexes are whole, no idea
    is held twice, and the next process folds through the words again."""
    db = tmp_path / "m.db"
    create_memory(db, **SCOPE).close()
    env = {"PYTHONPATH": ":".join(sys.path), "PATH": "/usr/bin:/bin"}
    acknowledged: list[tuple[str, str]] = []
    with subprocess.Popen([sys.executable, "-c", _LOOP, str(db)], stdout=subprocess.PIPE, text=True,
                          env=env) as writer:  # fmt: skip
        assert writer.stdout is not None
        try:
            for line in writer.stdout:
                acknowledged.append(tuple(json.loads(line)))  # type: ignore[arg-type]
                if len(acknowledged) >= 300:
                    break
        finally:
            writer.send_signal(signal.SIGKILL)
            writer.wait()
    assert writer.returncode == -signal.SIGKILL
    stored = _ids(db)
    lost = [note_id for note_id, _ in acknowledged if note_id not in stored]
    per_idea = Counter(_named(content) for _, content in _current(db))
    print(f"kill -9 after {len(acknowledged)} acknowledged writes: {len(lost)} lost, "
          f"{sum(count > 1 for count in per_idea.values())} ideas held twice")  # fmt: skip
    assert not lost
    assert {_named(text) for _, text in acknowledged} <= set(per_idea)
    assert all(count == 1 for count in per_idea.values())
    _assert_indexes_whole(db)
    memory = create_memory(db, **SCOPE)
    memory.index.fold_exact_rows = -1
    fabric = create_memory_fabric(memory)
    _note_id, text = acknowledged[0]
    again = fabric.remember(kind="fact", content=text + " again")
    assert again.supersedes is not None  # folded into the idea's current version
    assert not [c for _, c in _current(db) if c != again.content and _named(c) == _named(text)]
    memory.close()


# words FTS5's query language gives a meaning to, and pieces that are no word at all
_SYNTAX = ['"', '""', "'", "*", "^", "NEAR", "NEAR/2", "NEAR(a b)", "AND", "OR", "NOT", "(", ")", ":", "content:",
           "{content tags}:", "-", "+", "\\", "%", "_", "__init__", "$(id)", "`id`", ";", "--", "/*", "NULL",
           "\u200b", "e\u0301", "\u202e", "𝔘", "😀", "日本語", "Ωμέγα", "x" * 3000, "\t", "\r\n"]  # fmt: skip


def _words_up_to(vocabulary: list[str], chars: int, rng: random.Random) -> str:
    words: list[str] = []
    while sum(len(word) + 1 for word in words) < chars - 20:
        words.append(rng.choice(vocabulary))
    return " ".join(words)


def _hostile_cases(rng: random.Random, count: int) -> list[str]:
    """Prose-like notes with one to four hostile pieces, alone or glued to a word; then a few extremes."""
    cases = []
    for base in prose_notes(count, seed=41):
        words = base.split()
        for _ in range(rng.randint(1, 4)):
            piece, at = rng.choice(_SYNTAX), rng.randrange(len(words) - 1)
            words[at] = rng.choice([piece, words[at] + piece, piece + words[at]])
            if rng.random() < 0.5:
                words.insert(at, rng.choice(_SYNTAX))
        cases.append(" ".join(words))
    vocabulary = " ".join(prose_notes(40, seed=42)).split()
    cases += [
        _words_up_to(vocabulary, 3990, rng) + " itemlong",  # as many words as a note may hold
        _words_up_to(vocabulary, 4100, rng) + " itemover",  # past max_entry_text_chars: refused, nothing kept
        " ".join(["NEAR"] * 30 + ["OR"] * 30) + " itemops",  # operators only
        " ".join(rng.choice(_SYNTAX[:20]) for _ in range(40)) + " itemsyntax",
        "the of and to a in is it that " * 3 + "itemstop",  # stopwords only, then its name
        "日本語 の 文章 です 東京 大阪 京都 名古屋 札幌 福岡 神戸 横浜 item日本",
    ]
    return cases


def _row_count(fabric: Any) -> int:
    with fabric.memory.store.read() as conn:
        return int(conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0])


@pytest.mark.parametrize("seed", [5, 6])
def test_hostile_words_fold_through_the_word_index_as_through_the_vectors(tmp_path: Path, seed: int) -> None:
    """The same hostile notes go to a store folding through words and one folding through vectors: no
    write fails but a clear refusal, a note written twice is one note, and an edited copy folds through
    the words exactly when it folds through the vectors."""
    rng = random.Random(seed)
    cases = _hostile_cases(rng, 150)
    edits = [edited(text, random.Random(seed * 1000 + i)) for i, text in enumerate(cases)]
    fabrics: dict[str, Any] = {}
    for way, exact_rows in (("words", -1), ("vectors", FOLD_EXACT_ROWS)):
        memory = create_memory(tmp_path / f"{way}.db", **SCOPE)
        memory.index.fold_exact_rows = exact_rows
        fabrics[way] = create_memory_fabric(memory)
        for text in prose_notes(200, seed=43):  # other notes to fold into by mistake
            fabrics[way].remember(kind="fact", content=text)
    tally = Tally("word-index fold")
    outcomes: dict[str, list[str]] = {"words": [], "vectors": []}
    for i, (text, copy) in enumerate(zip(cases, edits, strict=True)):
        for way, fabric in fabrics.items():
            tally.tried += 1
            before = _row_count(fabric)
            try:
                first = fabric.remember(kind="fact", content=text)
                twice = fabric.remember(kind="fact", content=text)
                if twice.id != first.id and twice.supersedes != first.id:
                    tally.fail((way, i, text), "written twice, kept twice")
                other = fabric.remember(kind="fact", content=copy)
            except (MemoryValidationError, MemoryLimitError) as refusal:
                outcomes[way].append(f"refused: {refusal}")
                if _row_count(fabric) != before:
                    tally.fail((way, i, text), "refused, yet rows were written")
                continue
            except Exception as error:
                tally.fail((way, i, text), f"{type(error).__name__}: {error}")
                continue
            outcomes[way].append("folded" if other.id == twice.id or other.supersedes == twice.id else "kept apart")
    for i, (words, vectors) in enumerate(zip(outcomes["words"], outcomes["vectors"], strict=True)):
        if words != vectors:
            tally.fail((i, cases[i], edits[i]), f"edited copy: {words} through words, {vectors} through vectors")
    folded = outcomes["words"].count("folded")
    print(f"{tally.report()}\nedited copies: {folded} folded, {outcomes['words'].count('kept apart')} kept apart, "
          f"{sum(o.startswith('refused') for o in outcomes['words'])} refused")  # fmt: skip
    assert not tally.failures, tally.report()
    assert folded >= len(cases) * 0.8  # most single-word edits of 12+ words reach the threshold
    refused = {cases[i].split()[-1] for i, o in enumerate(outcomes["words"]) if o.startswith("refused")}
    assert "itemover" in refused and "itemlong" not in refused
    assert all(len(cases[i]) > 4000 for i, o in enumerate(outcomes["words"]) if o.startswith("refused"))
    for way, fabric in fabrics.items():
        fabric.memory.close()
        _assert_indexes_whole(tmp_path / f"{way}.db")
