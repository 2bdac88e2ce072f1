"""The documentation site builds without a warning (`mkdocs build --strict`: every page in the navigation, every
link and anchor between pages found), and the README's links into docs/ name pages that exist, so moving a
section cannot leave a dead link behind (issue 33, "a README that leads, and docs for the rest")."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from hoprag.paths import PROJECT_ROOT

DOCS = PROJECT_ROOT / "docs"
LINK = re.compile(r"\]\((docs/[^)#\s]+)(?:#[^)\s]*)?\)")


def test_the_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about its successor, not about the site
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        check=False, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "site" / "results" / "index.html").is_file()


def test_every_page_is_in_the_navigation_and_the_readme_links_only_to_pages_that_exist():
    nav = set(re.findall(r":\s*(\S+\.md)\s*$", (PROJECT_ROOT / "mkdocs.yml").read_text(encoding="utf-8"), re.MULTILINE))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert pages == nav, f"pages outside the navigation: {pages - nav}; navigation without a page: {nav - pages}"
    linked = LINK.findall((PROJECT_ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(linked) >= 10 and all((PROJECT_ROOT / link).is_file() for link in linked), linked


def test_the_results_pages_say_when_and_where_each_figure_was_measured():
    for page in sorted((DOCS / "results").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        assert "2 CPU cores, no GPU" in text, f"{page.name} does not name its machine"
        assert re.search(r"\b2026-\d\d-\d\d\b", text), f"{page.name} dates none of its figures"
