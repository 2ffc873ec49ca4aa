"""The web page in a real browser (Debian's Chromium through Playwright) against a real ``afi serve``.

Screenshots are written to each test's tmp dir; the note and search ones also to $AFI_SCREENSHOTS when
set (``AFI_SCREENSHOTS=docs/images`` refreshes the README's).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Dialog, Page, expect

from afi.auth.keys import KeyStore
from tests.support.servers import AfiServer, start_afi_serve

from .conftest import Watch, keep_screenshot, new_context, watched

UNITS = b"---\ntags: [physics, measures]\nimportance: 0.8\n---\n# Units\nWe measure in **SI units**: metres and kg.\n"
SCRIPT = b"Beware <script>window.pwned = 1</script> here.\n"


def _accept(watch: Watch) -> object:
    def accept(dialog: Dialog) -> None:
        watch.dialogs.append(dialog.message)
        dialog.accept()

    return accept


def _shot(page: Page, where: Path, *, keep: bool = False) -> None:
    """A full-page screenshot in the test's tmp dir; ``keep``: also in $AFI_SCREENSHOTS (the README's)."""
    page.screenshot(path=where, full_page=True)
    if keep:
        keep_screenshot(where)


def _clean(watch: Watch) -> None:
    assert watch.violations == [], watch.violations
    assert watch.errors == [], watch.errors
    assert watch.offsite == [], watch.offsite


@contextmanager
def _owner_server(base: Path) -> Iterator[AfiServer]:
    """A keyless ``afi serve`` (the local owner on loopback) holding a few notes."""
    with start_afi_serve(base / "afi.db", base / "files") as server:
        with httpx.Client(base_url=server.url) as api:
            for path, body in (("/facts/units.md", UNITS), ("/facts/script.md", SCRIPT),
                               ("/procedures/deploy.md", b"Run the tests, then tag the release.\n")):  # fmt: skip
                api.put("/afi/write", params={"path": path}, content=body).raise_for_status()
            message = {"role": "user", "text": "I like tea", "entry_id": "m1"}
            api.post("/ledger/s1/append", json={"messages": [message]}).raise_for_status()
            api.post("/ledger/s1/scope.open", json={"name": "drinks"}).raise_for_status()
            api.post("/ledger/s1/observe", json={"text": "The user prefers tea", "source_entry_ids": ["m1"]})
        yield server


@pytest.fixture
def owner_server(tmp_path: Path) -> Iterator[AfiServer]:
    """The seeded server, for a test of its own: one that edits and deletes."""
    with _owner_server(tmp_path) as server:
        yield server


@pytest.fixture(scope="module")
def reading_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AfiServer]:
    """The seeded server, shared by the tests that only read it (they change nothing in the store)."""
    with _owner_server(tmp_path_factory.mktemp("web-reading")) as server:
        yield server


@pytest.fixture
def owner_api(owner_server: AfiServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=owner_server.url) as api:
        yield api


def test_browse_edit_conflict_search_delete(
    browser: Browser, owner_server: AfiServer, owner_api: httpx.Client, tmp_path: Path
) -> None:
    url, watch, api = owner_server.url, Watch(), owner_api
    context = new_context(browser, watch)
    page = watched(context, watch)
    page.on("dialog", _accept(watch))

    page.goto(url + "/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.get_by_role("link", name="facts/", exact=True).click()
    expect(page.locator("h1")).to_have_text("/facts")
    expect(page.locator("table.tree")).to_contain_text("units.md")
    page.get_by_role("link", name="units.md").click()
    expect(page.locator("article.content strong")).to_have_text("SI units")
    expect(page.locator("dl.fields")).to_contain_text("physics")
    expect(page.locator("dl.fields")).to_contain_text("importance")
    _shot(page, tmp_path / "web-note.png", keep=True)

    # a note holding <script> shows it as text, and nothing runs
    page.get_by_role("link", name="facts", exact=True).click()
    page.get_by_role("link", name="script.md").click()
    expect(page.locator("article.content")).to_contain_text("<script>window.pwned = 1</script>")
    assert page.locator("article.content script").count() == 0
    assert page.evaluate("window.pwned") is None

    # edit in one tab while a second tab holds the same, now stale, version
    page.goto(url + "/ui/browse?path=%2Ffacts%2Funits.md")
    page.get_by_role("link", name="Edit").click()
    expect(page.locator("#edit-text")).to_have_value(re.compile("SI units"))
    second = watched(context, watch)
    second.goto(page.url)
    expect(second.locator("#edit-text")).to_have_value(re.compile("SI units"))
    page.locator("#edit-text").fill("We measure in SI units only.\n")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("article.content")).to_contain_text("SI units only")
    expect(page.locator("ol.timeline li")).to_have_count(2)

    second.locator("#edit-text").fill("We measure in imperial units.\n")
    second.get_by_role("button", name="Save").click()
    expect(second.locator("#conflict")).to_be_visible()
    expect(second.get_by_label("Your text")).to_have_value("We measure in imperial units.\n")
    expect(second.get_by_label("Stored now")).to_have_value(re.compile("SI units only"))
    _shot(second, tmp_path / "web-conflict.png")
    assert "SI units only" in api.get("/afi/read", params={"path": "/facts/units.md"}).text
    second.get_by_role("button", name="Save mine over it").click()
    expect(second.locator("article.content")).to_contain_text("imperial units")
    expect(second.locator("ol.timeline li")).to_have_count(3)

    # semantic search: each hit's explain signals as bars
    page.keyboard.press("Escape")
    page.locator("main").focus()
    page.keyboard.press("/")
    expect(page.locator("#q")).to_be_focused()
    page.locator("#q").fill("which units do we measure in")
    page.get_by_role("radio", name="semantic").check()
    page.get_by_role("button", name="Search").click()
    first = page.locator("li.hit").first
    expect(first.locator("a").first).to_have_text("/facts/units.md")
    expect(first.locator("meter")).to_have_count(3)
    assert float(first.locator("meter").first.get_attribute("value") or 0) > 0
    expect(first.locator("dl.signals")).to_contain_text("link")
    _shot(page, tmp_path / "web-search.png", keep=True)

    # exact search: the matching line, the match marked
    page.locator("#q").fill("imperial")
    page.get_by_role("radio", name="exact").check()
    page.get_by_role("button", name="Search").click()
    expect(page.locator("li.hit mark")).to_have_text("imperial")

    # delete, through the API with the page's own request
    page.goto(url + "/ui/browse?path=%2Fprocedures%2Fdeploy.md")
    page.get_by_role("button", name="Delete").click()
    expect(page.locator("h1")).to_have_text("/procedures")
    expect(page.locator("table.tree")).not_to_contain_text("deploy.md")
    assert watch.dialogs == ["Delete /procedures/deploy.md?"]
    assert api.get("/afi/stat", params={"path": "/procedures/deploy.md"}).status_code == 404
    _clean(watch)


def test_reading_needs_no_javascript(browser: Browser, reading_server: AfiServer) -> None:
    watch = Watch()
    page = watched(new_context(browser, watch, javascript=False), watch)
    page.goto(reading_server.url + "/")
    page.get_by_role("link", name="facts/", exact=True).click()
    page.get_by_role("link", name="units.md").click()
    expect(page.locator("article.content strong")).to_have_text("SI units")
    page.get_by_role("link", name="Search").click()
    page.locator("#q").fill("which units do we measure in")
    page.get_by_role("radio", name="semantic").check()
    page.get_by_role("button", name="Search").click()
    expect(page.locator("li.hit").first.locator("meter")).to_have_count(3)
    page.get_by_role("link", name="Ledger").click()
    page.get_by_role("link", name="s1.md").click()
    expect(page.locator("ol.transcript li.message")).to_contain_text("I like tea")
    expect(page.locator("ol.transcript li.observation")).to_contain_text("The user prefers tea")
    expect(page.locator("ol.transcript li.scope")).to_contain_text("drinks")
    _clean(watch)


def test_read_only_key_sees_no_edit_controls_and_forged_writes_are_refused(browser: Browser, tmp_path: Path) -> None:
    db = tmp_path / "afi.db"
    keys = KeyStore(db)
    admin = keys.create(scopes=("afi:admin",), name="admin")[1]
    reader = keys.create(scopes=("afi:read",), name="reader")[1]
    keys.close()
    bearer = {"Authorization": f"Bearer {admin}"}
    with start_afi_serve(db, tmp_path / "files") as server, httpx.Client(base_url=server.url, headers=bearer) as api:
        url, watch = server.url, Watch()
        api.put("/afi/write", params={"path": "/facts/units.md"}, content=b"We use SI units.\n").raise_for_status()
        context = new_context(browser, watch)
        page = watched(context, watch)
        page.on("dialog", _accept(watch))

        page.goto(url + "/ui/browse?path=%2Ffacts%2Funits.md")
        expect(page.locator("h1")).to_have_text("An API key is needed")
        page.get_by_role("textbox", name="API key").fill(reader)
        page.get_by_role("button", name="Use key").click()
        expect(page.locator("h1")).to_have_text("units.md")
        expect(page.locator(".who")).to_contain_text("afi:read")
        assert page.locator("[data-edit-controls]").count() == 0
        assert page.get_by_role("link", name="Edit").count() == 0
        assert page.get_by_role("button", name="Delete").count() == 0
        assert page.get_by_role("link", name="Keys").count() == 0
        assert page.evaluate("sessionStorage.getItem('afi-key')") == reader
        assert context.cookies() == [] and reader not in page.url

        forged = page.evaluate(
            """async (key) => {
                const put = (headers) =>
                    fetch('/afi/write?path=/facts/units.md', {method: 'PUT', headers, body: 'forged'});
                return [(await put({Authorization: 'Bearer ' + key})).status, (await put({})).status];
            }""",
            reader,
        )
        assert forged == [403, 401]
        assert "forged" not in api.get("/afi/read", params={"path": "/facts/units.md"}).text
        page.goto(url + "/ui/edit?path=%2Ffacts%2Funits.md")
        expect(page.locator("h1")).to_have_text("Not allowed")

        # an admin key: the keys, a new key's secret shown once, then revoked
        page.get_by_role("button", name="Forget key").click()
        expect(page.locator("h1")).to_have_text("An API key is needed")
        page.get_by_role("textbox", name="API key").fill(admin)
        page.get_by_role("button", name="Use key").click()
        page.get_by_role("link", name="Keys").click()
        expect(page.locator("table.keys")).to_contain_text("reader")
        page.get_by_label("Name").fill("laptop")
        page.get_by_label("Scope").select_option("afi:write")
        page.get_by_role("button", name="Create key").click()
        secret = page.locator("#new-secret code.token").inner_text()
        assert secret.startswith("afi_")
        assert httpx.get(url + "/afi/stat?path=/facts", headers={"Authorization": f"Bearer {secret}"}).is_success
        _shot(page, tmp_path / "web-keys.png")
        page.reload()
        expect(page.locator("table.keys")).to_contain_text("laptop")
        assert secret not in page.content()
        page.locator("tr", has_text="laptop").get_by_role("button").click()
        expect(page.locator("tr", has_text="laptop")).to_contain_text("revoked")
        revoked = httpx.get(url + "/afi/stat?path=/facts", headers={"Authorization": f"Bearer {secret}"})
        assert revoked.status_code == 401
        page.get_by_role("link", name="Audit").click()
        expect(page.locator("table.audit")).to_contain_text("key.revoke")
        _clean(watch)


def test_docs_render_their_operations_offline(browser: Browser, reading_server: AfiServer, tmp_path: Path) -> None:
    watch = Watch()
    page = watched(new_context(browser, watch), watch)
    page.goto(reading_server.url + "/docs")
    expect(page.locator(".opblock").first).to_be_visible()
    assert page.locator(".opblock").count() >= 10
    expect(page.locator(".opblock-summary-path", has_text="/afi/write").first).to_be_visible()
    expect(page.get_by_role("button", name=re.compile("Authorize"))).to_be_visible()
    _shot(page, tmp_path / "web-docs.png")
    _clean(watch)
