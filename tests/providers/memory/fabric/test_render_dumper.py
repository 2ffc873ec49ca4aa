"""render_note writes the same bytes through libyaml's emitter as through PyYAML's Python one."""

from __future__ import annotations

import random

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
