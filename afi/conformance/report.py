"""The kit's report: one outcome per scenario, as a rich table or as JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from rich.console import Console
from rich.table import Table

__all__ = ["Outcome", "Report"]

Result = Literal["pass", "fail", "skip"]
_STYLE = {"pass": "green", "fail": "bold red", "skip": "yellow"}


@dataclass(frozen=True)
class Outcome:
    """How one scenario went: pass, fail or skip, and why."""

    id: str
    title: str
    result: str
    detail: str
    seconds: float


@dataclass
class Report:
    """Every outcome of a run, and the totals."""

    outcomes: list[Outcome] = field(default_factory=list)
    provider: str = "unknown"
    profile: int = 3

    def count(self, result: Result) -> int:
        return sum(1 for o in self.outcomes if o.result == result)

    @property
    def ok(self) -> bool:
        """True when nothing failed."""
        return self.count("fail") == 0

    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.result == "fail"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "profile": self.profile,
            "ok": self.ok,
            "totals": {r: self.count(r) for r in ("pass", "fail", "skip")},
            "outcomes": [asdict(o) for o in self.outcomes],
        }

    def render(self, console: Console) -> None:
        """Print the report as a table with a one-line summary."""
        table = Table("scenario", "result", "detail", title=f"AFI conformance: {self.provider}, profile {self.profile}")
        for o in self.outcomes:
            table.add_row(o.id, f"[{_STYLE[o.result]}]{o.result}[/]", o.detail)
        console.print(table)
        totals = ", ".join(f"{self.count(r)} {r}" for r in ("pass", "fail", "skip"))
        console.print(f"[{'green' if self.ok else 'bold red'}]{totals}[/]")
