"""The README's walk-through (and docs/http.md's walk through every verb) as a new user follows it, top to
bottom: its snippets run and say something, and no step removes what a later step reads."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks(language: str, page: Path = README) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)


def test_the_python_snippet_runs_and_prints_what_its_comment_says(tmp_path: Path) -> None:
    snippet = next(block for block in _blocks("python") if "create_memory_fabric" in block)
    printed = next(line for line in snippet.splitlines() if line.startswith("print("))
    expected = printed.split("#", 1)[1].strip()
    run = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == expected


@pytest.mark.parametrize("page", ["README.md", "docs/http.md"])
def test_no_step_deletes_a_note_a_later_step_reads(page: str) -> None:
    steps = "\n".join(_blocks("sh", README.parent / page))
    deleted: dict[str, int] = {}
    for match in re.finditer(r"-X DELETE \"\$B/afi/delete\?path=(/[^\"&]+)\"", steps):
        deleted.setdefault(match.group(1), match.start())
    read_later = [
        (path, at)
        for pattern in (r"cat ~/memory(/\S+)", r"read\?path=(/[^\"&\s]+)")
        for m in re.finditer(pattern, steps)
        for path, at in [(m.group(1), m.start())]
    ]
    assert deleted, "the walk-through shows a delete"
    stale = [path for path, at in read_later if path in deleted and at > deleted[path]]
    assert stale == [], f"read after {page} deleted it: {stale}"


def test_make_run_passes_its_args_to_afi_serve() -> None:
    dry = subprocess.run(["make", "--no-print-directory", "-n", "run", "ARGS=--port 9000 --ssh"], cwd=README.parent,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    serve = [line for line in dry.stdout.splitlines() if " serve" in line]
    assert serve and serve[-1].endswith("afi serve --port 9000 --ssh"), dry.stdout
