"""The manifest: build it from what a provider offers, validate it against its JSON Schema.

The schema ships twice, ``manifest/manifest.schema.json`` for readers of the repository and
``afi/manifest.schema.json`` inside the package (a test keeps them identical).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from .errors import Internal
from .model import AFI_VERSION, Manifest
from .paths import MAX_PATH_BYTES

if TYPE_CHECKING:  # jsonschema loads with the first manifest checked: every provider imports this module
    import jsonschema

__all__ = [
    "PROFILE_VERBS",
    "VERBS",
    "build_manifest",
    "load_schema",
    "manifest_problems",
    "profile_of",
    "validate_manifest",
]

VERBS: tuple[str, ...] = ("stat", "list", "read", "search", "write", "mkdir", "delete", "move")

# The verbs each profile level adds (docs/afi.md, "Profiles and the manifest"); a level includes every level below it.
PROFILE_VERBS: dict[int, tuple[str, ...]] = {
    0: ("stat", "list"),
    1: ("read",),
    2: ("search",),
    3: ("write", "mkdir", "delete", "move"),
}


def profile_of(capabilities: Iterable[str]) -> int:
    """Given the verbs a provider offers, return the highest profile they complete (-1 for none)."""
    held = set(capabilities)
    level = -1
    for candidate in sorted(PROFILE_VERBS):
        if not set(PROFILE_VERBS[candidate]) <= held:
            break
        level = candidate
    return level


def build_manifest(
    *,
    provider: str,
    provider_version: str,
    capabilities: Iterable[str],
    search_modes: Iterable[str],
    max_results: int,
    auth_required: bool,
    auth_methods: Iterable[str],
    extra: Mapping[str, Any] | None = None,
) -> Manifest:
    """Given what a provider offers, return its validated manifest.

    ``extra`` holds vendor fields; every key must start with ``x-``. The profile is the highest
    level the capabilities complete.

    Raises:
        Internal: the result does not validate (a programmer error in the caller's arguments).
    """
    caps = [verb for verb in VERBS if verb in set(capabilities)]
    unknown = set(capabilities) - set(VERBS)
    if unknown:
        raise Internal(f"unknown capabilities: {', '.join(sorted(unknown))}")
    data: dict[str, Any] = {
        "afi_version": AFI_VERSION,
        "provider": provider,
        "provider_version": provider_version,
        "profile": max(profile_of(caps), 0),
        "capabilities": caps,
        "search": {"modes": list(dict.fromkeys(search_modes)), "max_results": max_results},
        "path": {"case_sensitive": True, "max_length": MAX_PATH_BYTES},
        "auth": {"required": auth_required, "methods": list(dict.fromkeys(auth_methods))},
    }
    for key, value in (extra or {}).items():
        if not key.startswith("x-"):
            raise Internal(f"manifest extra field {key!r} must start with 'x-'")
        data[key] = value
    validate_manifest(data)
    problems = manifest_problems(data)
    if problems:
        raise Internal("inconsistent manifest: " + "; ".join(problems))
    return Manifest.model_validate(data)


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """Return the manifest's JSON Schema (draft 2020-12), as shipped in the package."""
    text = resources.files("afi").joinpath("manifest.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def validate_manifest(data: Mapping[str, Any]) -> None:
    """Given a manifest as JSON data, return when it matches the schema.

    Raises:
        Internal: the manifest does not validate; the message names the field and the rule broken.
    """
    errors = sorted(_validator().iter_errors(dict(data)), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(part) for part in first.absolute_path) or "(root)"
        raise Internal(f"the manifest does not match its schema at {where}: {first.message}")


def manifest_problems(data: Mapping[str, Any]) -> list[str]:
    """Given a schema-valid manifest, return what is inconsistent in it (empty when nothing is).

    Checks that the capabilities complete the declared profile, that a provider with ``search``
    declares the mandatory ``exact`` mode, and that one without it declares no modes.
    """
    problems: list[str] = []
    caps = set(data.get("capabilities", []))
    profile = int(data.get("profile", 0))
    for level in range(profile + 1):
        missing = [verb for verb in PROFILE_VERBS.get(level, ()) if verb not in caps]
        if missing:
            problems.append(f"profile {profile} needs {', '.join(missing)} in capabilities")
    modes = list(data.get("search", {}).get("modes", []))
    if "search" in caps and "exact" not in modes:
        problems.append("search is offered but the mandatory mode 'exact' is not declared")
    if "search" not in caps and modes:
        problems.append("search modes are declared but 'search' is not a capability")
    return problems


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    """The schema's validator, compiled once per process."""
    import jsonschema

    return jsonschema.Draft202012Validator(load_schema())
