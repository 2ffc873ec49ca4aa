"""The AFI conformance kit: scenarios any AFI provider must pass, run through any :class:`AfiClient`.

Scratch data lives under ``/files/.conformance-<random>/`` and ``/facts/conformance-<random>-*.md``
and is removed at the end. A scenario whose verb the manifest omits checks ``unsupported`` instead.
"""

from __future__ import annotations

from . import s_access, s_list, s_manifest, s_paths, s_read, s_search, s_write
from ._base import Context, Failure, Scenario, Skip
from .report import Outcome, Report
from .runner import run_kit, scenarios

__all__ = ["Context", "Failure", "Outcome", "Report", "Scenario", "Skip", "run_kit", "scenarios"]

_SCENARIO_MODULES = (s_access, s_list, s_manifest, s_paths, s_read, s_search, s_write)
