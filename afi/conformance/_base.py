"""What a scenario is, the context it runs in, and the checks scenarios share."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..clients.base import AfiClient
from ..errors import AfiError
from ..model import Manifest

__all__ = [
    "REGISTRY",
    "Context",
    "Failure",
    "Scenario",
    "Skip",
    "check",
    "expect_error",
    "scenario",
]


class Failure(AssertionError):
    """A scenario's expectation did not hold; the message says what was expected and what came."""


class Skip(Exception):
    """The scenario does not apply to this provider; the message says why."""


@dataclass
class Context:
    """What scenarios share: the clients, the manifest, and the scratch area's names.

    Args:
        client: the client under test (its key may write).
        other: a client of another space (cloaking), when one was given.
        anonymous: a client sending no credentials, when the transport has credentials.
        forged: a client sending a well-formed but unknown token.
        profile: the highest profile level to check.
    """

    client: AfiClient
    other: AfiClient | None = None
    anonymous: AfiClient | None = None
    forged: AfiClient | None = None
    profile: int = 3
    tag: str = field(default_factory=lambda: secrets.token_hex(4))
    manifest: Manifest | None = None
    ready: bool = False  # the scratch data is in place
    notes: list[str] = field(default_factory=list)  # note paths to forget at the end
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def root(self) -> str:
        """The scratch folder of this run."""
        return f"/files/.conformance-{self.tag}"

    def at(self, *names: str) -> str:
        return "/".join((self.root, *names))

    def note(self, suffix: str, folder: str = "facts") -> str:
        """Given a suffix, return (and remember, for clean-up) a scratch note path."""
        path = f"/{folder}/conformance-{self.tag}-{suffix}.md"
        if path not in self.notes:
            self.notes.append(path)
        return path

    @property
    def marker(self) -> str:
        """A string that appears only in this run's scratch data."""
        return f"canary-{self.tag}"

    @property
    def capabilities(self) -> set[str]:
        return set(self.manifest.capabilities) if self.manifest else set()

    @property
    def modes(self) -> set[str]:
        return set(self.manifest.search.get("modes", [])) if self.manifest else set()

    def need_data(self) -> None:
        if not self.ready:
            raise Failure("the scratch data could not be set up (see the 'setup' row)")


ScenarioFn = Callable[[AfiClient, Context], None]


@dataclass(frozen=True)
class Scenario:
    """One check: an id, a title, the profile level it needs, the verb it exercises, and its body."""

    id: str
    title: str
    profile: int
    verb: str | None
    fn: ScenarioFn
    data: bool = True  # needs the scratch data

    def run(self, client: AfiClient, ctx: Context) -> None:
        self.fn(client, ctx)


REGISTRY: list[Scenario] = []


def scenario(
    id: str, title: str, *, profile: int = 0, verb: str | None = None, data: bool = True
) -> Callable[[ScenarioFn], ScenarioFn]:
    """Register the decorated function as a scenario (ids are unique)."""

    def register(fn: ScenarioFn) -> ScenarioFn:
        if any(existing.id == id for existing in REGISTRY):
            raise ValueError(f"duplicate scenario id {id}")
        REGISTRY.append(Scenario(id, title, profile, verb, fn, data))
        return fn

    return register


def check(condition: object, message: str) -> None:
    """Raise Failure(message) unless ``condition`` holds."""
    if not condition:
        raise Failure(message)


def expect_error(codes: str | tuple[str, ...], fn: Callable[..., Any], *args: Any, **kw: Any) -> AfiError:
    """Call ``fn``; return the AfiError it raised when its code is one of ``codes``, else fail."""
    wanted = (codes,) if isinstance(codes, str) else codes
    try:
        result = fn(*args, **kw)
    except AfiError as err:
        if err.code not in wanted:
            raise Failure(f"expected {' or '.join(wanted)}, got {err.code}: {err.message}") from None
        return err
    shown = repr(result)
    raise Failure(f"expected {' or '.join(wanted)}, but the call succeeded: {shown[:160]}")
