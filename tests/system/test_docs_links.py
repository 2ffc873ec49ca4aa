"""Every relative link in the README, CONTRIBUTING, CHANGELOG and docs/ leads somewhere: to a file of
the repository, and, with a ``#fragment``, to a heading of that page. None leads outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted([REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "CHANGELOG.md", *(REPO / "docs").rglob("*.md")])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
EXTERNAL = ("http://", "https://", "mailto:")


def _prose(page: Path) -> str:
    """Given a Markdown page, return its text without code blocks and code spans (their brackets are not links)."""
    return CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))


def _anchors(page: Path) -> set[str]:
    """Given a Markdown page, return the fragment ids of its headings, as GitHub makes them."""
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _broken(page: Path, root: Path = REPO) -> tuple[int, list[str]]:
    """Given a page, return how many relative links it holds and those that lead nowhere, or out of ``root``."""
    checked, broken = 0, []
    for target in LINK.findall(_prose(page)):
        if target.startswith(EXTERNAL):
            continue
        checked += 1
        where, _, fragment = target.partition("#")
        file = (page.parent / where).resolve() if where else page
        if not file.is_relative_to(root):
            broken.append(f"{target} (outside the repository)")
        elif not file.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and file.suffix == ".md" and fragment not in _anchors(file):
            broken.append(f"{target} (no such heading)")
    return checked, broken


def test_every_relative_link_in_the_docs_resolves() -> None:
    checked, broken = 0, []
    for page in PAGES:
        count, bad = _broken(page)
        checked += count
        broken += [f"{page.relative_to(REPO)}: {each}" for each in bad]
    assert len(PAGES) >= 20 and checked >= 100, f"only {checked} links in {len(PAGES)} pages: is the pattern right?"
    assert broken == [], f"{len(broken)} of {checked} links lead nowhere:\n" + "\n".join(broken)


def test_the_check_sees_a_broken_link_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# A heading\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[fine](other.md#a-heading) [gone](missing.md) [no heading](other.md#nowhere) [out](../x.md)\n"
        "`[code](nope.md)`\n"
        "```\n[in a block](nope.md)\n```\n",
        encoding="utf-8",
    )
    checked, broken = _broken(page, root=tmp_path)
    assert checked == 4
    expected = ["missing.md (no such file)", "other.md#nowhere (no such heading)", "../x.md (outside the repository)"]
    assert broken == expected
