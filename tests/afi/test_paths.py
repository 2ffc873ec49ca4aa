from __future__ import annotations

import pytest

from afi.errors import InvalidPath
from afi.paths import MAX_PATH_BYTES, basename, is_within, normalize, parent


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("/", "/", id="root"),
        pytest.param("//facts//a.md", "/facts/a.md", id="double-slash"),
        pytest.param("/facts/./a.md", "/facts/a.md", id="dot"),
        pytest.param("/facts/x/../a.md", "/facts/a.md", id="dotdot-inside"),
        pytest.param("/facts/", "/facts", id="trailing-slash"),
        pytest.param("/files/Caps.MD", "/files/Caps.MD", id="case-kept"),
    ],
)
def test_normalize(raw: str, expected: str) -> None:
    assert normalize(raw) == expected


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param("/..", "climbs above", id="dotdot-root"),
        pytest.param("/facts/../../etc", "climbs above", id="dotdot-escape"),
        pytest.param("/a\x00b", "NUL", id="nul"),
        pytest.param("facts/a.md", "absolute", id="relative"),
        pytest.param("", "empty", id="empty"),
        pytest.param("/" + "a" * MAX_PATH_BYTES, "longer than", id="too-long"),
        pytest.param("/" + "b" * 256, "segment", id="segment-too-long"),
    ],
)
def test_normalize_refuses(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidPath) as info:
        normalize(raw)
    assert fragment in info.value.message
    assert info.value.code == "invalid_path"


def test_helpers() -> None:
    assert parent("/facts/a.md") == "/facts"
    assert parent("/facts") == "/"
    assert parent("/") == "/"
    assert basename("/facts/a.md") == "a.md"
    assert is_within("/facts/a.md", "/facts")
    assert not is_within("/factsx", "/facts")
    assert is_within("/anything", "/")
