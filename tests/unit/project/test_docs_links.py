"""Every relative link in README.md and docs/ leads somewhere: the file exists in the repository, and a `#anchor` on a
Markdown page names one of its headings (GitHub's slug rule). External links are not fetched (no network here).

The README stays one page (at most 250 lines) and every page under docs/ is reachable from the index."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README_MAX_LINES = 250

_FENCE = re.compile(r"^ {0,3}(```|~~~)")
# A code span never holds a link; it stops at a blank line (a lone backtick must not swallow the page).
_CODE_SPAN = re.compile(r"(`+)(?:(?!\n[ \t]*\n).)+?\1", re.S)
_INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")


def outside_fences(text: str) -> str:
    """`text` with every fenced code block's lines blanked, so line numbers stay where they were."""
    lines, fence = [], None
    for line in text.split("\n"):
        opener = _FENCE.match(line)
        if fence is None and opener:
            fence = opener.group(1)
            lines.append("")
        elif fence is not None:
            if line.strip().startswith(fence):
                fence = None
            lines.append("")
        else:
            lines.append(line)
    return "\n".join(lines)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: link syntax reduced to its text, lower-case, every character but letters,
    digits, spaces, '-' and '_' dropped, spaces to '-'.

    >>> slug("Bring-up: `deploys/bringup.py`")
    'bring-up-deploysbringuppy'
    >>> slug("With the fleet's image cache")
    'with-the-fleets-image-cache'
    """
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a Markdown page; a repeated heading gets '-1', '-2', … as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for line in outside_fences(page.read_text()).split("\n"):
        heading = _HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[tuple[int, str]]:
    """(line, target) of every link on a Markdown page, outside code blocks and code spans."""
    text = outside_fences(page.read_text())
    text = _CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    found = [(m.start(), m.group(1)) for pattern in (_INLINE_LINK, _REFERENCE_DEF) for m in pattern.finditer(text)]
    return sorted((text.count("\n", 0, start) + 1, target) for start, target in found)


def broken_links(root: Path, pages: list[Path]) -> list[str]:
    """One line per link that leads nowhere: 'page:line: target: why'. http(s), mailto and other schemes are skipped."""
    problems = []
    for page in pages:
        where = page.relative_to(root).as_posix()
        for line, target in links(page):
            if _SCHEME.match(target):
                continue
            path_part, _, anchor = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page
            if not dest.is_relative_to(root.resolve()):
                problems.append(f"{where}:{line}: {target}: leads outside the repository")
            elif not dest.exists():
                problems.append(f"{where}:{line}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(
                    f"{where}:{line}: {target}: no heading '#{anchor}' in {dest.relative_to(root.resolve())}"
                )
    return problems


def doc_pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def test_every_relative_link_in_the_readme_and_docs_resolves() -> None:
    problems = broken_links(ROOT, doc_pages(ROOT))
    assert not problems, "broken links (fix the target or the heading):\n" + "\n".join(problems)


def test_the_checker_catches_a_broken_file_link_and_a_broken_anchor(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Page A\n\n## Real heading: `x.py`\n\n## Twice\n\n## Twice\n")
    (tmp_path / "README.md").write_text(
        "# Top\n\n"
        "[ok](docs/a.md) [ok](docs/a.md#real-heading-xpy) [ok](docs/a.md#twice-1) [ok](#top) [ok](docs/)\n"
        "[gone](docs/missing.md)\n"
        "[bad anchor](docs/a.md#nope)\n"
        "[bad local](#nowhere)\n"
        "[web](https://example.invalid/x.md) [mail](mailto:a@example.invalid)\n"
        "`[in code](docs/none.md)`\n\n"
        "```\n[in a fence](docs/none.md)\n```\n\n"
        "[ref]: docs/ref-missing.md\n"
    )
    assert broken_links(tmp_path, [tmp_path / "README.md"]) == [
        "README.md:4: docs/missing.md: no such file",
        "README.md:5: docs/a.md#nope: no heading '#nope' in docs/a.md",
        "README.md:6: #nowhere: no heading '#nowhere' in README.md",
        "README.md:14: docs/ref-missing.md: no such file",
    ]
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "README.md").write_text("[out](../../outside.md)\n")
    assert broken_links(tmp_path / "sub", [tmp_path / "sub" / "README.md"]) == [
        "README.md:1: ../../outside.md: leads outside the repository"
    ]


def test_the_slug_follows_github() -> None:
    assert slug("Quick start") == "quick-start"
    assert slug("`hgxkit recipe import`") == "hgxkit-recipe-import"
    assert slug("Router (optional): `roles/router`") == "router-optional-rolesrouter"
    assert slug("Back again: importing an export") == "back-again-importing-an-export"
    assert slug("See [the index](docs/README.md)") == "see-the-index"


def test_the_readme_is_one_page_and_every_doc_is_in_the_index() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES, "README.md grew past one page: move the detail into docs/"
    assert "make demo" in readme and "make test" in readme
    index = {target.partition("#")[0] for _, target in links(ROOT / "docs" / "README.md")}
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name != "README.md":
            assert page.name in index, f"docs/{page.name} is not linked from docs/README.md"


def test_every_doc_page_opens_with_a_title_and_a_sentence_of_what_it_covers() -> None:
    for page in sorted((ROOT / "docs").rglob("*.md")):
        paragraphs = page.read_text().split("\n\n")
        assert paragraphs[0].startswith("# ") and "\n" not in paragraphs[0], f"{page.name}: no title line"
        opening = paragraphs[1]
        assert opening.startswith("This page") and opening.rstrip().endswith("."), (
            f"{page.name}: the paragraph under the title must say what the page covers ('This page …')"
        )
