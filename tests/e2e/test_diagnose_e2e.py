"""Real browser, the Diagnose group: Token health keeps its filters and its table in agreement when the tokenizer
changes. (Under-trained tokens' verification of SmolLM2, shown in the run that made it, is an AppTest:
tests/app/test_undertrained_models_page.py::test_page_smollm2_pipeline.)"""

from __future__ import annotations

import re

from e2e_support import add_example, mark, pick_tokenizer, screenshot, wait_idle, wait_rerun
from playwright.sync_api import Page, expect
from support import load_shared

from analysis.bpe import stt_report

SLOW = 240_000  # a first STT of Llama-3.1 on a busy 2-core machine


def _chips(page: Page, label: str) -> list[str]:
    """The chips a multiselect shows (what the user sees as the filter)."""
    box = page.locator('[data-testid="stMultiSelect"]').filter(has_text=label)
    tags = box.locator('.react-aria-ComboBox [data-testid="stMultiSelectTagsContainer"] [data-tag]')
    return [t.get_attribute("aria-label") or "" for t in tags.all()]


def _shown_ids(page: Page) -> int:
    """The "N of M ids" count above the token table."""
    caption = page.get_by_text(re.compile(r"^[\d,]+ of [\d,]+ ids$"))
    return int(caption.inner_text().split(" of ")[0].replace(",", ""))


def test_token_health_filters_and_table_agree_after_switching_tokenizer(page: Page, app_url, artifacts):
    page.set_default_timeout(SLOW)
    page.goto(app_url + "/token_health")
    wait_idle(page, SLOW)
    expect(page.get_by_text(re.compile(r"^3 of 151,646 ids$"))).to_be_visible(
        timeout=SLOW
    )  # Qwen: its 3 specials
    add_example(page, "llama-3.1")
    expect(page.get_by_text(re.compile(r"of 128,256 ids$"))).to_be_visible(timeout=SLOW)  # selected on adding
    pick_tokenizer(page, "Qwen (embedded)")
    expect(page.get_by_text(re.compile(r"^3 of 151,646 ids$"))).to_be_visible(timeout=SLOW)
    # a filter set on the first tokenizer: special and reachable tokens, searched
    cats = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Categories")
    since = mark(page)
    cats.locator("input").fill("Reachable")
    cats.locator("input").press("Enter")
    page.keyboard.press("Escape")
    wait_rerun(page, since, SLOW)
    assert _chips(page, "Categories") == ["Special / added", "Reachable"]

    pick_tokenizer(page, "llama-3.1")
    expect(page.get_by_text(re.compile(r"of 128,256 ids$"))).to_be_visible(timeout=SLOW)
    wait_idle(page, SLOW)
    summary = stt_report(load_shared("llama-3.1")).summary()
    chips = _chips(page, "Categories")
    labels = {
        "Reachable": "reachable",
        "Only via merge skipping": "merge_skip_only",
        "Special / added": "special",
    }
    assert chips and all(c in labels for c in chips), chips
    assert _shown_ids(page) == sum(summary[labels[c]] for c in chips)  # the chips are the table's filter
    screenshot(page, artifacts / "diagnose_token_health_switched.png")

    # the next interaction keeps them in agreement: a search within the shown categories finds rows
    search = page.get_by_label("Search (readable or raw form)")
    search.fill("việ")
    since = mark(page)  # a new search text: Enter reruns the app
    search.press("Enter")
    wait_rerun(page, since, SLOW)
    assert _chips(page, "Categories") == chips
    expect(page.get_by_text(re.compile(r"^[1-9][\d,]* of 128,256 ids$"))).to_be_visible(timeout=SLOW)
