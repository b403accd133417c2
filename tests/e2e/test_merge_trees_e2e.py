"""Real browser: search a Llama-3.1 token, see its merge tree, then filter Llama-3.1's unreachable tokens."""

from __future__ import annotations

import re

from e2e_support import mark, screenshot, wait_idle, wait_rerun
from playwright.sync_api import Page, expect

SLOW = 240_000  # first STT / vocabulary structure of Llama-3.1 on a busy 2-core machine


def test_merge_tree_and_unreachable_filter(page: Page, app_url, artifacts):
    page.goto(app_url)  # a fresh server knows its st.navigation pages only after a first run
    wait_idle(page, SLOW)
    page.goto(app_url + "/merge_trees?t=example:llama-3.1")
    wait_idle(page, SLOW)
    expect(page.get_by_role("heading", name="Merge trees")).to_be_visible(timeout=SLOW)

    # search a token: ' việc' is one of the 588 tokens the merges cannot build
    box = page.get_by_label("Search a token")
    box.fill(" việc")
    since = mark(page)  # each search below changes the text: Enter always reruns the app; wait for that run
    box.press("Enter")
    wait_rerun(page, since, SLOW)
    expect(page.locator('[data-testid="stMetricValue"]').filter(has_text=re.compile(r"^NO$"))).to_be_visible(
        timeout=SLOW
    )
    chart = page.locator('[data-testid="stPlotlyChart"]').first
    expect(chart.locator(".main-svg").first).to_be_visible(timeout=SLOW)
    expect(chart.locator("g.textpoint").first).to_be_attached(timeout=SLOW)
    drawn = chart.text_content() or ""
    assert "#7752" in drawn, drawn[:300]  # the rank of ' v'+'i' labels a node of the tree BPE builds
    expect(page.get_by_text("would make it").first).to_be_visible()
    assert "token=" in page.url
    screenshot(page, artifacts / "look_merge_trees_llama31.png")

    # a reachable token: its tree is drawn and the tokens built on it are listed
    box.fill(" Token")
    since = mark(page)  # (a bare wait_idle could return before the rerun was asked for: both headings)
    box.press("Enter")
    wait_rerun(page, since, SLOW)
    expect(page.locator('[data-testid="stMetricValue"]').filter(has_text=re.compile(r"^yes$"))).to_be_visible(
        timeout=SLOW
    )
    # one heading once the rerun has finished (until then the previous token's "(0)" heading may still be shown)
    expect(page.get_by_text("Tokens built on it (0)", exact=True)).to_have_count(0, timeout=SLOW)
    built = page.get_by_text(re.compile(r"^Tokens built on it \(\d+\)$"))
    expect(built).to_have_count(1, timeout=SLOW)
    expect(built).to_be_visible()

    # Token health: Llama-3.1's 588 unreachable tokens, filtered by a search
    page.goto(app_url + "/token_health?t=example:llama-3.1")
    wait_idle(page, SLOW)
    expect(page.get_by_text("588", exact=True).first).to_be_visible(timeout=SLOW)
    expect(page.get_by_text("588 of 128,256 ids")).to_be_visible(timeout=SLOW)
    search = page.get_by_label("Search (readable or raw form)")
    search.fill("việ")
    since = mark(page)
    search.press("Enter")
    wait_rerun(page, since, SLOW)
    caption = page.get_by_text("of 128,256 ids")
    expect(caption).not_to_have_text("588 of 128,256 ids", timeout=SLOW)  # the search's rerun has finished
    shown = int(caption.inner_text().split(" of ")[0].replace(",", ""))
    assert 0 < shown < 588
    expect(page.get_by_text("Why is a token unreachable?")).to_be_visible()
    screenshot(page, artifacts / "diagnose_token_health_llama31.png")
