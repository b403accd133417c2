"""Real browser: start the app, load an example tokenizer folder, compare two tokenizers, take a screenshot."""

from __future__ import annotations

from e2e_support import wait_idle
from playwright.sync_api import Page, expect


def test_load_folder_and_compare(page: Page, app_url, artifacts):
    page.set_default_timeout(90_000)  # a busy 2-core CI machine
    page.goto(app_url)
    wait_idle(page)
    expect(page.get_by_text("151,646", exact=True)).to_be_visible(timeout=60_000)  # the embedded default

    # server-side paths are off by default (README, Limits and security): load the operator's example folder
    tab = page.get_by_role("tab", name="Examples")
    expect(tab).to_be_visible()
    tab.click()
    box = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Example tokenizers")
    box.locator("input").fill("llama-3.1")
    box.locator("input").press("Enter")
    page.keyboard.press("Escape")
    wait_idle(page)
    page.get_by_role("button", name="Load examples").click()
    expect(page.get_by_text("128,256", exact=True)).to_be_visible(timeout=60_000)
    wait_idle(page)
    expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_visible(timeout=60_000)

    page.get_by_role("link", name="Playground").click()
    wait_idle(page)
    text = page.get_by_label("Text")
    text.fill("Tere hommikust! Tokenizers differ on naïve words.")
    text.press("Control+Enter")
    wait_idle(page)
    box = page.locator('[data-testid="stMultiSelect"]').first
    box.locator("input").fill("llama-3.1")
    box.locator("input").press("Enter")
    page.keyboard.press("Escape")
    wait_idle(page)
    expect(page.locator(".tl-spans")).to_have_count(2, timeout=60_000)
    expect(page.get_by_text("llama-3.1 ·")).to_be_visible()
    assert page.locator(".tl-tok").count() > 10
    assert "t=embedded" in page.url and "llama-3.1" in page.url
    page.screenshot(path=str(artifacts / "foundation_playground.png"), full_page=True)
