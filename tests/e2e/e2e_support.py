"""Helpers for real-browser tests: drive the Streamlit app through Playwright (the fixtures are in
tests/e2e/conftest.py, paths in tests/support.py)."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect


def wait_idle(page: Page, timeout: int = 60_000) -> None:
    """Wait until the app is connected, the script has finished and the 'Running…' widget is gone."""
    page.wait_for_selector('[data-testid="stApp"][data-test-connection-state="CONNECTED"]', timeout=timeout)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)
    expect(page.locator('[data-testid="stStatusWidget"]')).to_be_hidden(timeout=timeout)


def add_example(page: Page, name: str) -> None:
    """Add an example tokenizer to the session library through the sidebar."""
    box = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(
        has_text="Add an example"
    )
    box.click()
    page.get_by_role("option", name=name, exact=True).click()
    wait_idle(page)
    page.locator('[data-testid="stSidebar"]').get_by_role("button", name="Add", exact=True).click()
    wait_idle(page)
    expect(page.locator('[data-testid="stSidebar"]').get_by_text(name, exact=True)).to_be_visible(
        timeout=60_000
    )


def pick_tokenizer(page: Page, name: str) -> None:
    """Choose `name` in the page's first selectbox (the tokenizer picker)."""
    page.locator('[data-testid="stMain"] [data-testid="stSelectbox"]').first.click()
    page.get_by_role("option", name=name, exact=True).click()
    wait_idle(page)


def download(page: Page, button: str, path: Path, timeout: int = 120_000) -> Path:
    """Click a download button and save what the browser receives to `path`."""
    with page.expect_download(timeout=timeout) as dl:
        page.get_by_role("button", name=button).click()
    dl.value.save_as(path)
    return path


def screenshot(page: Page, path: Path, max_height: int = 9000) -> Path:
    """A screenshot of the whole page: the viewport is stretched to the height of Streamlit's scrolling main
    area for the shot (a plain full-page screenshot stops at the viewport), then put back."""
    size = page.viewport_size or {"width": 1400, "height": 1000}
    height = page.evaluate(
        '() => Math.max(...[...document.querySelectorAll(\'[data-testid="stMain"], '
        '[data-testid="stAppViewContainer"], [data-testid="stSidebarContent"]\')].map(e => e.scrollHeight))'
    )
    page.set_viewport_size(
        {"width": size["width"], "height": min(max(size["height"], int(height) + 40), max_height)}
    )
    try:
        page.wait_for_timeout(600)  # charts re-layout to the new size
        page.screenshot(path=str(path))
    finally:
        page.set_viewport_size(size)
    return path
