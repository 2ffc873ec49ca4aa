"""``python -m bench <name>|all [--quick] [--notes=N]``: run one benchmark module of this folder, or all.

A benchmark is a module here with a ``run()`` function (``run(quick=...)`` when it has a quick mode,
``run(notes=...)`` when it takes a note count).
``python -m bench._plots`` then draws each result beside its baseline (``make bench`` runs both).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path

# Listed first, in this order; any other benchmark module found here runs after them.
CORE = ("remember", "recall", "locomo")


def benchmarks() -> list[str]:
    """Return the names of the benchmark modules in this folder."""
    found = [m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if not m.name.startswith("_")]
    return [*CORE, *sorted(set(found) - set(CORE))]


def main(argv: list[str]) -> int:
    """Given the command-line arguments, run the named benchmarks; return the exit code."""
    names = [a for a in argv if not a.startswith("-")]
    options: dict[str, object] = {"quick": "--quick" in argv}
    notes = [a.removeprefix("--notes=") for a in argv if a.startswith("--notes=")]
    known = benchmarks()
    unknown = [a for a in argv if a.startswith("-") and a != "--quick" and not a.startswith("--notes=")]
    if len(names) != 1 or names[0] not in (*known, "all") or unknown or not all(n.isdigit() for n in notes):
        print(f"usage: python -m bench {{{'|'.join(known)}|all}} [--quick] [--notes=N]", file=sys.stderr)
        return 2
    if notes:
        options["notes"] = int(notes[-1])
    for name in known if names[0] == "all" else names:
        run = importlib.import_module(f"bench.{name}").run
        accepted = inspect.signature(run).parameters
        if "notes" in options and "notes" not in accepted and names[0] != "all":  # all: where it applies
            print(f"bench {name} takes no --notes", file=sys.stderr)
            return 2
        run(**{key: value for key, value in options.items() if key in accepted})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
