from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from afi.errors import Internal
from afi.manifest import VERBS, build_manifest, manifest_problems, profile_of, validate_manifest
from afi.model import dump

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "manifest" / "examples").glob("*.json"))


def ours(**changes: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "provider": "afi-memory",
        "provider_version": "0.1.0",
        "capabilities": VERBS,
        "search_modes": ["exact", "regex", "semantic"],
        "max_results": 1000,
        "auth_required": False,
        "auth_methods": ["bearer"],
        "extra": {"x-limits": {"list_max": 1000}},
    }
    args.update(changes)
    return dump(build_manifest(**args))


def test_the_packaged_schema_is_the_repository_schema() -> None:
    shipped = (REPO / "afi" / "manifest.schema.json").read_bytes()
    assert (REPO / "manifest" / "manifest.schema.json").read_bytes() == shipped


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_validates_and_is_consistent(path: Path) -> None:
    data = json.loads(path.read_text())
    validate_manifest(data)
    assert manifest_problems(data) == []


def test_ours_declares_profile_3_with_every_verb_and_three_modes() -> None:
    data = ours()
    assert data["profile"] == 3
    assert data["capabilities"] == list(VERBS)
    assert data["search"]["modes"] == ["exact", "regex", "semantic"]
    assert data["path"] == {"case_sensitive": True, "max_length": 1024}
    assert data["x-limits"] == {"list_max": 1000}
    validate_manifest(data)


def test_the_profile_follows_the_capabilities() -> None:
    assert ours(capabilities=["stat", "list", "read"], search_modes=[])["profile"] == 1
    assert profile_of(["stat", "list", "search"]) == 0  # search without read does not reach profile 2
    assert profile_of(["list"]) == -1


@pytest.mark.parametrize(
    ("change", "where"),
    [
        pytest.param(lambda d: d.pop("auth"), "(root)", id="missing-auth"),
        pytest.param(lambda d: d.update(profile=4), "profile", id="profile-4"),
        pytest.param(lambda d: d["capabilities"].append("chmod"), "capabilities/8", id="unknown-verb"),
        pytest.param(lambda d: d.update(vendor="x"), "(root)", id="extra-without-x"),
        pytest.param(lambda d: d["search"].update(modes=["fuzzy"]), "search/modes/0", id="unknown-mode"),
        pytest.param(lambda d: d["path"].update(case_sensitive="yes"), "path/case_sensitive", id="bad-bool"),
        pytest.param(lambda d: d["auth"].update(token="x"), "auth", id="extra-in-auth"),
        pytest.param(lambda d: d.update(afi_version="2.0"), "afi_version", id="wrong-version"),
    ],
)
def test_the_schema_refuses_a_bad_manifest_and_names_where(change: Any, where: str) -> None:
    data = copy.deepcopy(ours())
    change(data)
    with pytest.raises(Internal) as caught:
        validate_manifest(data)
    assert f"at {where}:" in caught.value.message


def test_x_fields_are_allowed_as_extras_anywhere_the_schema_has_objects() -> None:
    data = ours()
    data["x-anything"] = {"free": ["form"]}
    data["search"]["x-budget"] = True
    validate_manifest(data)


def test_build_refuses_extra_fields_without_x_prefix_and_unknown_verbs() -> None:
    with pytest.raises(Internal, match="must start with 'x-'"):
        ours(extra={"limits": {}})
    with pytest.raises(Internal, match="unknown capabilities: chmod"):
        ours(capabilities=[*VERBS, "chmod"])


def test_build_refuses_search_without_the_exact_mode() -> None:
    with pytest.raises(Internal, match="mandatory mode 'exact'"):
        ours(search_modes=["semantic"])


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        pytest.param({"capabilities": ["stat", "list", "read"]}, "profile 3 needs search", id="profile-above-verbs"),
        pytest.param({"search": {"modes": ["regex"]}}, "mandatory mode 'exact'", id="no-exact"),
    ],
)
def test_consistency_problems_are_named(change: dict[str, Any], problem: str) -> None:
    data = {**ours(), **change}
    assert any(problem in p for p in manifest_problems(data))


def test_modes_without_the_search_verb_are_a_problem() -> None:
    data = {**ours(), "profile": 1, "capabilities": ["stat", "list", "read"]}
    assert manifest_problems(data) == ["search modes are declared but 'search' is not a capability"]
