"""Real browser: compare 3 tokenizers on 10 FLORES languages, see the heatmap, download the CSV."""

from __future__ import annotations

import csv

from e2e_support import add_example, download, wait_idle
from playwright.sync_api import Page, expect


def test_compare_three_tokenizers_on_ten_languages(page: Page, app_url, artifacts):
    page.goto(app_url + "/compression")
    wait_idle(page)
    add_example(page, "llama-3.1")
    add_example(page, "gpt2")
    expect(page.get_by_text("Compression across FLORES-200 languages")).to_be_visible(timeout=60_000)

    toks = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Tokenizers (1–8)")
    for name in ("llama-3.1", "gpt2"):
        toks.locator("input").fill(name)
        toks.locator("input").press("Enter")
        wait_idle(page)
    page.keyboard.press("Escape")
    expect(page.get_by_text("3 tokenizer(s) × 10 language(s)")).to_be_visible(timeout=60_000)

    page.get_by_role("button", name="Compute").click()
    wait_idle(page, timeout=300_000)
    expect(page.get_by_text("3 tokenizer(s) × 10 language(s) on")).to_be_visible(timeout=300_000)
    heatmap = page.locator('[data-testid="stPlotlyChart"]').first
    expect(heatmap.locator(".main-svg").first).to_be_visible(timeout=60_000)
    expect(heatmap.locator(".heatmaplayer, .hm").first).to_be_attached(timeout=60_000)
    page.screenshot(path=str(artifacts / "compression_heatmap.png"), full_page=True)

    page.get_by_role("tab", name="Compare").click()
    expect(page.get_by_text("Win rate of A")).to_be_visible(timeout=60_000)
    page.get_by_role("tab", name="Per script").click()
    expect(page.get_by_text("Across languages")).to_be_visible(timeout=60_000)
    page.get_by_role("tab", name="Drill down").click()
    expect(page.locator(".tl-spans").first).to_be_visible(timeout=60_000)
    assert page.locator(".tl-spans").count() == 5  # the 5 worst-compressed sentences, tokenized
    page.screenshot(path=str(artifacts / "compression_drilldown.png"), full_page=True)

    page.get_by_role("tab", name="Download").click()
    path = download(page, "Download CSV", artifacts / "compression.csv")
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert len(rows) == 30
    assert {r["tokenizer"] for r in rows} == {"Qwen (embedded)", "llama-3.1", "gpt2"}
    assert len({r["lang"] for r in rows}) == 10
    llama_eng = next(r for r in rows if r["tokenizer"] == "llama-3.1" and r["lang"] == "eng_Latn")
    assert round(float(llama_eng["bytes_per_token"]), 3) == 4.862
