from __future__ import annotations

import inspect

import pytest

import afi
from afi.errors import ERRNO, ERROR_CODES, HTTP_STATUS, SSH_EXIT, AfiError, RateLimited, error_from_dict


@pytest.mark.parametrize("code", ERROR_CODES)
def test_every_code_is_mapped_at_every_boundary(code: str) -> None:
    assert code in HTTP_STATUS
    assert code in ERRNO
    assert code in SSH_EXIT


@pytest.mark.parametrize("code", ERROR_CODES)
def test_round_trip_through_the_wire_shape(code: str) -> None:
    err = error_from_dict({"code": code, "message": "m", "path": "/p", "retry_after": 3})
    assert err.code == code
    again = error_from_dict(err.to_dict())
    assert type(again) is type(err)
    assert again.to_dict() == err.to_dict()


def test_rate_limited_always_carries_retry_after() -> None:
    assert error_from_dict({"code": "rate_limited", "message": "slow down"}).retry_after is not None
    assert RateLimited("x", retry_after=2).to_dict()["retry_after"] == 2


def test_unknown_code_is_internal() -> None:
    assert error_from_dict({"code": "weird", "message": "?"}).code == "internal"


def test_public_api_is_exactly_all() -> None:
    public = {name for name in dir(afi) if not name.startswith("_") and not inspect.ismodule(getattr(afi, name))} - {
        "annotations"
    }
    assert public == set(afi.__all__) - {"__version__"}
    for name in afi.__all__:
        assert hasattr(afi, name)
    assert issubclass(afi.NotFound, AfiError)
