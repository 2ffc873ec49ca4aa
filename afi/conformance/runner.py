"""Run the kit: fetch the manifest, lay out scratch data, run every scenario, clean up."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from ..clients.base import AfiClient, CannotExpress
from ..errors import AfiError, NotFound, RateLimited
from ._base import REGISTRY, Context, Failure, Scenario, Skip, expect_error
from .report import Outcome, Report
from .s_manifest import _PROBES

__all__ = ["cleanup", "run_kit", "scenarios", "setup"]

_ALPHA = "first line\nthe {m} sings\nthird line\n{M} shouts\nlast line\n"
_BETA = "nothing here\nanother {m} line\n"
_GAMMA = "# gamma\n{m} in sub\n"
_SKY = "The sky over the harbour is a deep cobalt blue at dawn, the fishermen say ({m})."
_COFFEE = "Alice drinks a double espresso every morning before she walks to work."


def scenarios() -> list[Scenario]:
    """Return every scenario in run order (rate-limit bursts last, so they disturb nothing)."""
    return sorted(REGISTRY, key=lambda s: s.id.startswith("limits."))


def _patient(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """Call ``fn``, waiting out rate limits (clean-up runs after a deliberate burst)."""
    for _ in range(20):
        try:
            return fn(*args, **kw)
        except RateLimited as err:
            time.sleep(min(float(err.retry_after or 1.0), 5.0))
    return fn(*args, **kw)


def setup(client: AfiClient, ctx: Context) -> None:
    """Given a writable client, lay out this run's scratch files and notes."""
    m = ctx.marker
    ctx.state["alpha"] = _ALPHA.format(m=m, M=m.upper()).encode()
    ctx.state["gamma"] = _GAMMA.format(m=m).encode()
    client.mkdir(ctx.root)
    client.write(ctx.at("alpha.txt"), ctx.state["alpha"], create_only=True)
    client.write(ctx.at("beta.txt"), _BETA.format(m=m).encode(), create_only=True)
    client.write(ctx.at("bytes.bin"), bytes(range(256)), create_only=True)
    client.mkdir(ctx.at("sub"))
    client.write(ctx.at("sub", "gamma.md"), ctx.state["gamma"], create_only=True)
    client.mkdir(ctx.at("page"))
    for i in range(7):
        client.write(ctx.at("page", f"p{i:02d}.txt"), f"page {i}\n".encode(), create_only=True)
    client.write(ctx.note("sky"), _SKY.format(m=m).encode())
    client.write(ctx.note("coffee"), _COFFEE.encode())
    ctx.ready = True


def cleanup(client: AfiClient, ctx: Context) -> list[str]:
    """Remove the scratch folder and notes; return what could not be removed."""
    left: list[str] = []
    for path in [ctx.root, *ctx.notes]:
        try:
            _patient(client.delete, path, recursive=path == ctx.root)
        except NotFound:
            continue
        except AfiError as err:
            left.append(f"{path}: {err.code}: {err.message}")
    return left


def _timed(outcomes: list[Outcome], id: str, title: str, body: Callable[[], str | None]) -> None:
    start = time.perf_counter()
    try:
        detail = body() or ""
        result = "pass"
    except (Skip, CannotExpress) as err:  # a client that cannot say the request: the scenario does not apply
        result, detail = "skip", str(err)
    except Failure as err:
        result, detail = "fail", str(err)
    except AfiError as err:
        result, detail = "fail", f"unexpected {err.code}: {err.message}" + (f" ({err.path})" if err.path else "")
    except Exception as err:
        result, detail = "fail", f"{type(err).__name__}: {err}"
    outcomes.append(Outcome(id, title, result, detail, time.perf_counter() - start))


def run_kit(
    client: AfiClient,
    *,
    other: AfiClient | None = None,
    anonymous: AfiClient | None = None,
    forged: AfiClient | None = None,
    profile: int = 3,
    only: Iterable[str] | None = None,
) -> Report:
    """Given a client (and optional clients for cloaking and credential checks), run the kit.

    Args:
        profile: scenarios needing a higher profile level are skipped.
        only: run just the scenarios whose id starts with one of these prefixes.
    """
    ctx = Context(client=client, other=other, anonymous=anonymous, forged=forged, profile=profile)
    outcomes: list[Outcome] = []

    def fetch() -> str:
        ctx.manifest = client.manifest()
        return f"{ctx.manifest.provider} {ctx.manifest.provider_version}, profile {ctx.manifest.profile}"

    _timed(outcomes, "manifest.fetch", "the manifest is served", fetch)

    def prepare() -> str:
        if not {"write", "mkdir"} <= ctx.capabilities:
            raise Skip("the provider is read-only: no scratch data, scenarios that need it are skipped")
        setup(client, ctx)
        return f"scratch data under {ctx.root}"

    _timed(outcomes, "setup", "scratch files and notes are laid out", prepare)
    no_data = outcomes[-1].result == "skip"
    wanted = tuple(only) if only else None
    for item in scenarios():
        if wanted and not item.id.startswith(wanted):
            continue
        _timed(outcomes, item.id, item.title, _body(item, client, ctx, no_data))

    def tidy() -> str:
        left = cleanup(client, ctx) if ctx.ready else []
        if left:
            raise Failure("left behind: " + "; ".join(left))
        return "scratch data removed" if ctx.ready else "nothing to remove"

    _timed(outcomes, "cleanup", "scratch data is removed", tidy)
    manifest = ctx.manifest
    return Report(
        outcomes=outcomes,
        provider=f"{manifest.provider} {manifest.provider_version}" if manifest else "unknown",
        profile=profile,
    )


def _body(item: Scenario, client: AfiClient, ctx: Context, no_data: bool) -> Callable[[], str | None]:
    def body() -> str | None:
        if item.verb is not None and ctx.manifest is not None and item.verb not in ctx.capabilities:
            expect_error("unsupported", _PROBES[item.verb], client, ctx)
            return f"{item.verb} is not in the manifest; the call was refused with unsupported"
        if item.profile > ctx.profile:
            raise Skip(f"needs profile {item.profile}; the kit checks up to {ctx.profile}")
        if item.data and no_data:
            raise Skip("needs scratch data, which a read-only provider cannot hold")
        item.run(client, ctx)
        return None

    return body
