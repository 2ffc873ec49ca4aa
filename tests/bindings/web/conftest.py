"""A real Chromium (Debian's, driven by Playwright: no browser download) for the web page's tests.

Every page runs in a context that refuses any request off this machine, so a test that passes shows
the page (and /docs) working offline, and records Content-Security-Policy violations and page errors.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, Playwright, Route, sync_playwright

CHROMIUM = os.environ.get("AFI_CHROMIUM", "/usr/bin/chromium")


# Module-scoped, not session-scoped: while Playwright's sync API runs, its event loop is the thread's
# running loop, so a later test calling asyncio.run() (the MCP and SSH clients do) would fail.
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: `make setup` installs Debian's chromium (apt-get install chromium)")
    launched = playwright.chromium.launch(executable_path=CHROMIUM)
    yield launched
    launched.close()


class Watch:
    """What went wrong in a page: CSP violations, uncaught errors, requests that tried to leave."""

    def __init__(self) -> None:
        self.violations: list[str] = []
        self.errors: list[str] = []
        self.offsite: list[str] = []
        self.dialogs: list[str] = []

    def console(self, message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text or "Refused to" in message.text:
            self.violations.append(message.text)

    def route(self, route: Route) -> None:
        host = urlsplit(route.request.url).hostname
        if host in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            self.offsite.append(route.request.url)
            route.abort()


def new_context(browser: Browser, watch: Watch, *, javascript: bool = True) -> BrowserContext:
    """A fresh context (its own sessionStorage) that may only reach this machine."""
    context = browser.new_context(java_script_enabled=javascript, viewport={"width": 1200, "height": 860})
    context.route("**/*", watch.route)
    return context


def watched(context: BrowserContext, watch: Watch) -> Page:
    page = context.new_page()
    page.on("console", watch.console)
    page.on("pageerror", lambda err: watch.errors.append(str(err)))
    return page


def keep_screenshot(source: Path) -> None:
    """Copy a screenshot to $AFI_SCREENSHOTS too, when set (docs/images for the README)."""
    folder = os.environ.get("AFI_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(source, Path(folder) / source.name)
