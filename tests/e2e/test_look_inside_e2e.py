"""Real browser, the Look inside group and the way in: the Home page on a 1280×720 screen (library reachable
without scrolling), a journey one click away, a shared Playground link (ids, boundary diff, no Session State
warning in the server log), adding an example from the sidebar, loading an example folder on Load & inspect (server paths are off by default)."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

from e2e_support import choose, screenshot, wait_idle
from playwright.sync_api import Page, expect
from support import ROOT

LINK = "/playground?t=example:gpt2&t=example:llama-3.1&text=Tokenizers%20split%20na%C3%AFve%20words%20differently"


def test_home_page_and_a_journey_on_a_small_screen(page: Page, app_url, artifacts):
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(app_url)
    wait_idle(page)
    expect(page.get_by_role("heading", name="Tokenizer Lab")).to_be_visible()
    expect(page.get_by_text("What each group answers")).to_be_visible()
    sidebar = page.locator('[data-testid="stSidebar"]')
    # the library and its "Add an example" are on screen without scrolling
    for part in (sidebar.get_by_text("Tokenizer library"), sidebar.get_by_text("Add an example")):
        box = part.bounding_box()
        assert box and box["y"] + box["height"] <= 720, box
    page.screenshot(path=str(artifacts / "look_home_1280x720.png"))
    page.get_by_role("link", name="Open the Playground").click()
    expect(page.get_by_role("heading", name="Playground")).to_be_visible()
    expect(page.locator(".tl-spans")).to_have_count(3)  # the journey's three tokenizers
    wait_idle(page)
    assert len(parse_qs(urlparse(page.url).query)["t"]) == 3
    page.goto(app_url + "/home")  # a typed or bookmarked /home: Home, not "Page not found"
    expect(page.get_by_role("heading", name="Tokenizer Lab")).to_be_visible()
    wait_idle(page)
    expect(page.get_by_text("Page not found")).to_have_count(0)


def test_shared_playground_link(page: Page, app_url, artifacts):
    page.goto(app_url + LINK)
    wait_idle(page)
    expect(page.locator(".tl-spans")).to_have_count(2)
    expect(page.get_by_text("Where the boundaries differ")).to_be_visible()
    ids = page.locator('[data-testid="stCode"]')
    expect(ids).to_have_count(2)
    assert re.fullmatch(r"[\d ]+", ids.first.inner_text().strip())  # the id sequence, as copyable text
    screenshot(page, artifacts / "look_playground_shared_link.png")
    log = (ROOT / "streamlit-e2e.log").read_text(encoding="utf-8")
    assert "created with a default value but also had its value set" not in log


def test_add_an_example_and_load_a_folder(page: Page, app_url, artifacts):
    page.goto(app_url + "/inspect")
    wait_idle(page)
    expect(page.get_by_text("151,646", exact=True)).to_be_visible()  # the embedded default
    sidebar = page.locator('[data-testid="stSidebar"]')
    choose(page, sidebar.locator('[data-testid="stSelectbox"]').filter(has_text="Add an example"), "gemma")
    wait_idle(page)
    sidebar.get_by_role("button", name="Add", exact=True).click()
    # the page's picker selects it: Gemma's 256,000 tokens on Load & inspect
    expect(page.get_by_text("256,000", exact=True)).to_be_visible(timeout=120_000)
    wait_idle(page)
    remove = sidebar.locator('[data-testid="stBaseButton-tertiary"]').filter(has_text="delete", visible=True)
    expect(remove).to_have_count(1)  # one per removable tokenizer: a bin icon
    assert "delete" in remove.inner_text() and "›" not in remove.inner_text()

    page.get_by_text(
        "Load a tokenizer", exact=True
    ).click()  # folded once the library has more than the default
    # server-side paths are off by default (docs/security.md): the path tab says so, and the
    # operator's example folders load in one click
    page.get_by_role("tab", name="Local folder or file").click()
    expect(page.get_by_text("Server-side paths are off").first).to_be_visible()
    page.get_by_role("tab", name="Examples").click()
    box = page.locator('[data-testid="stMain"] [data-testid="stMultiSelect"]').filter(
        has_text="Example tokenizers"
    )
    choose(page, box, "llama-3.1")
    page.keyboard.press("Escape")
    wait_idle(page)
    page.get_by_role("button", name="Load examples").click()
    expect(page.get_by_text("128,256", exact=True)).to_be_visible(timeout=60_000)
    wait_idle(page)
    # the first view's chart is static SVG (no chart module); the toggle brings the interactive Plotly chart
    expect(page.locator('svg.tl-svg-chart[aria-label="Vocabulary by script"]')).to_be_visible(timeout=60_000)
    screenshot(page, artifacts / "look_inspect_llama31.png")
    page.get_by_text("Interactive chart", exact=True).click()
    wait_idle(page)
    expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_visible(timeout=60_000)
