"""examples/memory_fabric.py runs end to end, and each step shows the behaviour docs/memory-fabric.md describes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "memory_fabric.py"


def test_example_runs_and_shows_every_step(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--db", str(tmp_path / "example.db")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "same id: True" in out
    supersede = re.search(r"new ([0-9a-f]{20}) supersedes ([0-9a-f]{20}); old row valid_to=(\S+)", out)
    assert supersede and supersede.group(1) != supersede.group(2) and supersede.group(3) != "None"
    assert "untyped recall returns no procedure: True; kinds=['procedure'] finds: ['Deploy via canary first']" in out
    assert "before attach: refused (forbidden)" in out
    assert "attached: True; linker enabled: True" in out
    assert "[working-memory] Prefers terse output" in out and "[semantic-memory]" in out
    assert "tools: ['memory.view', 'memory.read', 'memory.insert', 'memory.recall', 'memory.forget']" in out
    assert "read: 'Canary for 10 minutes\\nThen roll out to all regions'" in out
    assert "recall file notes: [('runbooks/deploy.md', 'Canary for 10 minutes\\nThen roll out to all regions')]" in out
    assert "read ../outside.md: refused (invalid_path)" in out
    assert "moved 1 note(s)" in out and "now at runbooks/release.md" in out
    assert "1 note(s) tombstoned; recall finds it: False" in out
    assert "recall 'preferred units' now: []" in out
    assert "attached after detach: False" in out
