"""The question explorer (`explorer.html`, written by `python compare.py --out`) in a real headless Chromium, opened
from disk as a reader would: no console or page error, the outcome filters and the search change the listed
questions, and a clicked question shows each run's answer, its gold passages and its PruneRAG tree.

Chromium is Debian's (`make test` installs the `chromium` package where it is missing, as root); Playwright
(the `test` extra) drives it, never a browser of its own. Without a Chromium the test is skipped saying so,
except under CI (`CI=true`), where a missing browser fails it. With `HOPRAG_SCREENSHOT=docs/img/explorer.png` it
saves a screenshot of the page with a question open there.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hoprag.compare import build, write
from tests.unit.test_compare_explorer import explorer_runs

pytestmark = pytest.mark.browser

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]  # fmt: skip


def chromium() -> str:
    """Debian's Chromium, or a skip (a failure under CI, whose `make test` installs it)."""
    found = os.environ.get("HOPRAG_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and Path("/usr/bin/chromium").is_file():
        found = "/usr/bin/chromium"
    if found is None:
        reason = "no Chromium found (apt-get install chromium, or HOPRAG_CHROMIUM=<path>): the browser test is skipped"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}, but CI must run it: `make test` installs Debian's chromium as root")
        pytest.skip(reason)
    return found


@pytest.fixture
def browser_page():
    """A page of a headless Chromium and the console errors and page errors it reports."""
    executable = chromium()
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is the `test` extra: make install")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=FLAGS, headless=True)
        try:
            page, errors = browser.new_page(viewport={"width": 1400, "height": 1000}), []
            page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
            yield page, errors
        finally:
            browser.close()


def rows(page) -> int:
    return page.locator("#rows tr").count()


def test_the_explorer_filters_questions_and_opens_one_with_its_tree(tmp_path, browser_page):
    page, errors = browser_page
    runs = explorer_runs(tmp_path)
    write(build(runs, resamples=20), tmp_path / "out")  # what `python compare.py RUNS --out DIR` writes
    page.goto((tmp_path / "out" / "explorer.html").resolve().as_uri())
    page.wait_for_selector("#rows tr")
    assert rows(page) == 6 and page.locator("#count").inner_text() == "6 of 6 questions"

    page.select_option("#outcome-0", "1")  # A (base) right: q0, q1, q2
    assert rows(page) == 3
    page.select_option("#outcome-1", "0")  # and B (tree) wrong: q0 alone
    assert rows(page) == 1 and page.locator("#rows tr td").nth(1).inner_text() == "Is 0 a number, question 0?"
    page.select_option("#outcome-0", "")
    page.select_option("#outcome-1", "")
    page.check("#disagree")  # q0, q3, q4
    assert rows(page) == 3
    page.uncheck("#disagree")
    page.fill("#search", "question 4")
    assert rows(page) == 1
    page.select_option("#rule", "1")  # right means Acc = 1: the same verdicts here
    page.fill("#search", "")
    assert rows(page) == 6

    page.locator("#rows tr", has_text="question 3").click()
    detail = page.locator("#detail")
    assert detail.locator("h2").inner_text() == "Is 3 a number, question 3?"
    tree_card = detail.locator("section.run[data-run='1']")
    assert tree_card.locator(".answer .right").is_visible()  # the tree run answered q3 right
    assert detail.locator("section.run[data-run='0'] .answer .wrong").is_visible()
    assert tree_card.locator(".tree", has_text="PruneRAG tree").is_visible()
    assert tree_card.get_by_text("Who founded A3?").is_visible()  # a node of the tree, drawn open
    assert tree_card.locator("li.gold").count() == 2 and tree_card.get_by_text("depth 2").is_visible()
    tree_card.locator(".tree summary", has_text="q3?").click()  # collapsible: the sub-query folds away
    assert not tree_card.get_by_text("Who founded A3?").is_visible()

    shot = os.environ.get("HOPRAG_SCREENSHOT")
    if shot:
        Path(shot).parent.mkdir(parents=True, exist_ok=True)
        tree_card.locator(".tree summary", has_text="q3?").click()
        page.screenshot(path=shot, full_page=True)
    assert errors == []
