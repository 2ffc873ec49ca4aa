"""Markdown render bombs against the web page of a real ``afi serve``.

markdown-it-py costs up to ~50 µs a line or syntax character, and more on some shapes (a megabyte
of ``[`` took 18 s of CPU). The page renders Markdown only within a bound (characters, and
characters Markdown may read as syntax); past it the page shows the text as it is, escaped, and
says why. Each bomb below is written to ``/files`` and browsed: the page must answer, escape what
it holds, render only what is within the bound, and show the rest as text.
"""

from __future__ import annotations

import html
from pathlib import Path

import httpx

from afi.bindings.web.markdown import RENDER_MAX_CHARS, RENDER_MAX_MARKS, markup_marks
from tests.bindings.web.test_web_attacks import hostile_free
from tests.support.servers import AfiServer

SIZE = 256 * 1024
TAIL = "\n<script>alert(1)</script> end"  # every bomb ends with a tag that must come back escaped


def _fill(unit: str, size: int = SIZE) -> str:
    return (unit * (size // len(unit) + 1))[:size]


BOMBS = {
    "brackets": "[" * SIZE,
    "links": _fill("[a](b)"),
    "images": _fill("!["),
    "wide-table": "|" + "a|" * (SIZE // 4) + "\n|" + "-|" * (SIZE // 4) + "\n",
    "table-rows": "|a|b|\n|-|-|\n" + _fill("|x|y|\n"),
    "emphasis": _fill("*a"),
    "mixed-emphasis": _fill("*_"),
    "stars": "*" * SIZE,
    "backticks": "`" * SIZE,
    "backtick-runs": "".join("`" * k + " a " for k in range(1, 700)),
    "angles": "<" * SIZE,
    "open-tags": _fill("<a "),
    "nested-quotes": ">" * SIZE,
    "quote-lines": "".join("> " * i + "a\n" for i in range(500)),
    "nested-lists": "".join("  " * i + "- a\n" for i in range(500)),
    "list-items": _fill("- a\n"),
    "ordered-items": _fill("1. a\n"),
    "headings": _fill("# h\n"),
    "short-lines": _fill("a\n"),
    "link-references": "".join(f"[r{i}]: /u{i}\n" for i in range(SIZE // 14)),
    "long-reference": "[a]: <" + "x" * SIZE + ">\n[a]",
    "entities": _fill("&amp;"),
    "escapes": _fill("\\*"),
    "just-under": _fill("![a ", 4 * 2000),  # within the bound: rendered, and escaped
}


def test_render_bombs_render_within_the_bound_and_show_as_text_past_it(module_server: AfiServer) -> None:
    failures, rendered = [], 0
    with httpx.Client(base_url=module_server.url, timeout=300) as web:
        for name, bomb in BOMBS.items():
            text = bomb + TAIL
            path = f"/files/{name}.md"
            assert web.put("/afi/write", params={"path": path}, content=text.encode()).status_code == 200
            page = web.get("/ui/browse", params={"path": path})
            within = len(text) <= RENDER_MAX_CHARS and markup_marks(text) <= RENDER_MAX_MARKS
            as_text = '<pre class="content">' in page.text and "Shown as text" in page.text
            as_html = '<article class="content">' in page.text
            rendered += as_html
            problems = hostile_free(page) + (["unescaped"] if "<script>alert(1)" in page.text else [])
            if page.status_code != 200 or problems or as_text == as_html or as_html != within:
                failures.append((name, page.status_code, problems, "html" if as_html else "text", within))
            elif as_text and html.escape(text[:2000], quote=False) not in page.text:
                failures.append((name, "the text shown is not the file's"))
    assert failures == [], f"{len(BOMBS)} bombs, {len(failures)} failures: {failures}"
    assert rendered == 1  # just-under


def test_a_long_document_of_prose_still_renders(module_server: AfiServer) -> None:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    assert len(readme) <= RENDER_MAX_CHARS and markup_marks(readme) <= RENDER_MAX_MARKS, "the README renders"
    put = httpx.put(module_server.url + "/afi/write", params={"path": "/files/README.md"}, content=readme.encode())
    assert put.status_code == 200
    page = httpx.get(module_server.url + "/ui/browse", params={"path": "/files/README.md"}, timeout=60)
    assert page.status_code == 200 and '<article class="content">' in page.text and "<h2" in page.text
