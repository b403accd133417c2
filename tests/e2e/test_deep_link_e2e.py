"""Real browser: a fresh server's very first request is a deep link; the page still runs inside the app.py frame
(navigation sections, the sidebar library), not in Streamlit's legacy pages/ mode (ui/__init__.py)."""

from __future__ import annotations

from e2e_support import screenshot, wait_idle
from playwright.sync_api import Page, expect


def test_first_request_deep_link_runs_in_the_frame(page: Page, fresh_app_url, artifacts):
    page.goto(fresh_app_url + "/playground?t=example:gpt2&text=Hello%20deep%20link")
    wait_idle(page, 120_000)
    expect(page.get_by_role("heading", name="Playground")).to_be_visible(timeout=120_000)
    sidebar = page.locator('[data-testid="stSidebar"]')
    expect(sidebar.get_by_text("Tokenizer library")).to_be_visible(timeout=60_000)
    # st.navigation's groups in the top bar, not the legacy pages/ list in the sidebar
    nav = page.locator('[data-testid="stTopNav"]')
    expect(nav.locator('[data-testid="stTopNavSection"]').filter(has_text="Change")).to_be_visible()
    nav.locator('[data-testid="stTopNavSection"]').filter(has_text="Change").click()
    expect(page.get_by_role("menuitem", name="Source-attributed BPE")).to_be_visible()
    page.keyboard.press("Escape")
    assert sidebar.get_by_role("link", name="Playground").count() == 0
    expect(page.get_by_text("gpt2 ·").first).to_be_visible(timeout=60_000)  # the link's tokenizer was loaded
    assert "/playground" in page.url
    screenshot(page, artifacts / "deep_link_first_request.png")
