"""The doors made of the MCP SDK load after the server listens: what waits, what is refused, what is served.

``afi serve`` holds the paths of the MCP endpoint and the built-in authorization server with stand-ins
(:class:`~afi.bindings.http.deferred.DeferredDoors`) and builds the real routes once its lifespan starts.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from afi.app.serve import AppSpec
from afi.auth.oauth.paths import MCP_PATHS, OAUTH_PATHS
from afi.bindings.http.deferred import DeferredDoors


def _served_app() -> Starlette:
    async def here(request: Request) -> PlainTextResponse:
        return PlainTextResponse("here")

    return Starlette(routes=[Route("/here", here)])


def _doors(release: threading.Event | None = None, fail: str | None = None) -> Starlette:
    if release is not None:
        assert release.wait(30), "the test released the build"
    if fail is not None:
        raise RuntimeError(fail)

    async def door(request: Request) -> JSONResponse:
        return JSONResponse({"door": request.path_params.get("space", "-"), "method": request.method})

    return Starlette(routes=[Route("/door", door, methods=["GET"]), Route("/spaces/{space}/door", door)])


def test_a_request_that_comes_first_waits_for_the_doors_while_others_are_served() -> None:
    release = threading.Event()
    app = _served_app()
    DeferredDoors(lambda: _doors(release), ["/door", "/spaces/{space}/door"], what="the test door").mount(app)
    answers: list[tuple[int, object]] = []
    with TestClient(app) as client:
        assert client.get("/here").text == "here", "the app serves before the doors are built"

        def ask() -> None:
            answer = client.get("/door")
            answers.append((answer.status_code, answer.json()))

        waiting = threading.Thread(target=ask)
        waiting.start()
        waiting.join(0.3)
        assert waiting.is_alive() and answers == [], "the request waits for the doors"
        release.set()
        waiting.join(30)
        assert answers == [(200, {"door": "-", "method": "GET"})]
        assert client.get("/spaces/work/door").json() == {"door": "work", "method": "GET"}
        refused = client.post("/door")
        assert refused.status_code == 405, "the doors' own routes decide the methods"


def test_doors_that_cannot_be_built_are_a_503_with_the_reason_and_the_rest_serves(
    capfd: pytest.CaptureFixture[str],
) -> None:
    app = _served_app()
    DeferredDoors(lambda: _doors(fail="no receipts table"), ["/door"], what="the test door").mount(app)
    with TestClient(app) as client:
        answer = client.get("/door")
        assert answer.status_code == 503
        error = answer.json()["error"]
        assert error["code"] == "internal" and "the test door could not start" in error["message"]
        assert "no receipts table" in error["message"]
        assert client.get("/here").text == "here"
    assert "afi: the test door could not start: RuntimeError: no receipts table" in capfd.readouterr().err


def test_a_request_that_waits_too_long_is_told_to_retry() -> None:
    release = threading.Event()
    app = _served_app()
    doors = DeferredDoors(lambda: _doors(release), ["/door"], what="the test door", wait_seconds=0.05)
    doors.mount(app)
    try:
        with TestClient(app) as client:
            answer = client.get("/door")
            assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
            assert "the test door is still starting" in answer.json()["error"]["message"]
            release.set()
    finally:
        release.set()


def test_waiting_doors_are_built_before_the_app_serves_and_their_failure_stops_the_start() -> None:
    app = _served_app()
    DeferredDoors(lambda: _doors(), ["/door"], what="the test door", wait=True).mount(app)
    with TestClient(app) as client:
        assert client.get("/door").json()["door"] == "-"
    broken = _served_app()
    DeferredDoors(lambda: _doors(fail="broken"), ["/door"], what="the test door", wait=True).mount(broken)
    with pytest.raises(RuntimeError, match="broken"), TestClient(broken):
        pass


def test_the_held_paths_are_the_paths_the_real_doors_serve(tmp_path: Path) -> None:
    spec = AppSpec(tmp_path / "afi.db", tmp_path / "files")
    _app, provider = spec.build()
    doors = spec.doors(provider, None)
    served = {getattr(route, "path", None) for route in doors.router.routes}
    assert served == set(MCP_PATHS) | set(OAUTH_PATHS)
    without_oauth = AppSpec(tmp_path / "afi.db", tmp_path / "files", oauth=False).doors(provider, None)
    assert {getattr(route, "path", None) for route in without_oauth.router.routes} == set(MCP_PATHS)


def test_an_app_started_again_builds_its_doors_again() -> None:
    built: list[int] = []

    def count() -> Starlette:
        built.append(1)
        return _doors()

    app = _served_app()
    DeferredDoors(count, ["/door"], what="the test door").mount(app)
    for _ in range(2):
        with TestClient(app) as client:
            assert client.get("/door").status_code == 200
    assert len(built) == 2
