"""render_note writes the same bytes through libyaml's emitter as through PyYAML's Python one."""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml

from afi.providers.memory import MemoryNote
from afi.providers.memory.fabric import render as R
from afi.providers.memory.fabric.render import render_note

PIECES = [*"abcXYZ019 -:#'\"!@%&*{}[],|>?`~\\/.\t\n", "  ", "\n\n", " \n", "- ", ": ", " #", "---", "...", "yes",
          "null", "~", "1e3", "0x1F", "2026-01-01", "é", "\u2028", "\x85", "😀", "&a", "*a", "!tag"]  # fmt: skip


def _python_render(note: MemoryNote, monkeypatch: pytest.MonkeyPatch) -> str:
    with monkeypatch.context() as patch:
        patch.setattr(R, "_dumper_for", lambda front: R._Dumper)
        rendered: str = render_note(note)
        return rendered


def test_libyaml_is_available_and_used_for_plain_notes() -> None:
    assert R._CDumper is not R._Dumper and issubclass(R._CDumper, yaml.CSafeDumper)
    assert R._dumper_for({"tags": ["ops", "a: b"], "importance": 0.5}) is R._CDumper
    assert R._dumper_for({"context": "two\nlines"}) is R._Dumper
    assert R._dumper_for({"tags": ["café"]}) is R._Dumper


@pytest.mark.slow
def test_rendering_is_byte_identical_to_the_python_emitter(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(5)
    for i in range(3000):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 10)))
        note = MemoryNote(
            id=f"{i:012x}", kind="fact", content=f"body {text}", name=text.strip() or "n",
            ingested_at="2026-01-01T00:00:00.000Z", created_at="2026-01-01T00:00:00.000Z", token_count=3,
            tags=[text, "ops"], keywords=[text], context=text, importance=rng.random(),
            links=[{"id": "0123456789ab", "relation": text, "weight": 0.5}],
        )  # fmt: skip
        assert render_note(note) == _python_render(note, monkeypatch), repr(text)


def _dumped_whole(note: MemoryNote) -> str:
    """The front matter as one YAML dump of every field (how render_front wrote it before it wrote lines)."""
    data = note.model_dump(mode="json", exclude_none=True, exclude={"scope"})
    front = {key: data[key] for key in R._ORDER if data.get(key) not in (None, [], {})}
    return "---\n" + R._dump(front) + "---\n"


WORDS = ["ops", "a-b", "n0", "Deploy_2", "x.y/z", "1+1", "a:b", "a :b", "a: b", "12:30", "0o17", "0x1F", "1_000",
         "on", "Yes", "NULL", "null", "~", "true", "1e3", "1.5e+3", ".5", "-", "-a", "a -", "two words",
         "two  spaces", " lead", "trail ", "2026-01-01", "2026-12-05T00:27:22.401Z", "#x", "a #x", "a#x", "'q'",
         "é", "=", "<<", "x" * 1001, "k" * 130, ""]  # fmt: skip
NUMBERS = [0, 1, -5, 2**70, 0.0, -0.0, 0.5, 1.0, 1e16, 1e-05, 123456789.123, -2.5e-300, True, False]


def _value(rng: random.Random) -> Any:
    pick = rng.random()
    if pick < 0.5:
        return rng.choice([*WORDS, rng.choice(PIECES) + rng.choice(WORDS)])
    if pick < 0.8:
        return rng.choice(NUMBERS)
    return {rng.choice(WORDS) or "k": rng.choice(WORDS + NUMBERS)}


def test_front_matter_lines_are_what_one_dump_of_every_field_writes() -> None:
    rng = random.Random(7)
    for i in range(3000):
        words = [rng.choice(WORDS) for _ in range(rng.randint(0, 3))]
        links = [{"id": "0123456789ab", "relation": rng.choice(WORDS) or "r", **({"weight": rng.choice(NUMBERS[5:12])}
                  if rng.random() < 0.5 else {})} for _ in range(rng.randint(0, 2))]  # fmt: skip
        consent = {rng.choice(WORDS) or "k": _value(rng) for _ in range(rng.randint(0, 3))}
        note = MemoryNote(
            id=f"{i:012x}", kind="fact", content="body", name=rng.choice(WORDS) or None,
            ingested_at="2026-01-01T00:00:00.000Z", created_at="2026-01-01T00:00:00.000Z",
            token_count=rng.choice([0, 3, 10**9]),
            tags=words, keywords=list(reversed(words)), context=rng.choice(WORDS) or None,
            importance=rng.choice([None, *NUMBERS[4:12]]), links=links, consent=consent or None,
        )  # fmt: skip
        assert R.render_front(note) == _dumped_whole(note), note


def test_plain_fields_are_written_without_the_emitter() -> None:
    from afi.providers.memory.fabric.yaml_lines import field_lines

    assert field_lines("created_at", "2026-12-05T00:27:22.401Z") == "created_at: '2026-12-05T00:27:22.401Z'\n"
    assert field_lines("tags", ["ops", "yes"]) == "tags:\n- ops\n- 'yes'\n"
    assert field_lines("links", [{"id": "0123456789ab", "relation": "won_over"}]) == (
        "links:\n- id: 0123456789ab\n  relation: won_over\n"
    )
    assert field_lines("importance", 1e16) == "importance: 1.0e+16\n"
    # what needs the emitter is left to it
    assert field_lines("context", "two\nlines") is None and field_lines("context", "a: b") is None
    assert field_lines("consent", {"scope": {"nested": True}}) is None
