"""Real browser: extend Llama-3.1 with 1,000 Estonian tokens, see before/after, download the zip."""

from __future__ import annotations

import io
import json
import re
import zipfile

import tokenizers
from e2e_support import download, screenshot, wait_idle
from playwright.sync_api import Page, expect


def test_extend_llama3_with_estonian_and_download(page: Page, app_url, artifacts):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(app_url)  # the Home page's journey "Adapt a tokenizer to a language": one click
    wait_idle(page)
    page.get_by_role("link", name="Open Extend").click()
    expect(page.get_by_text("Extend a tokenizer", exact=True)).to_be_visible(timeout=60_000)
    expect(page.get_by_text("lines 801–1012 are held out", exact=False)).to_be_visible(timeout=60_000)
    wait_idle(page)
    expect(page.get_by_role("combobox", name="Tokenizer")).to_have_value("llama-3.1")  # the link's tokenizer

    page.get_by_role("button", name="Train", exact=True).click()
    wait_idle(page, timeout=600_000)
    expect(page.get_by_text("Bytes per token at N = 1,000")).to_be_visible(timeout=600_000)
    # the results sit in tabs right under the N slider: the first one starts above the fold at 1280×800
    page.locator('[data-testid="stMain"]').evaluate("e => e.scrollTo(0, 0)")  # the Train click scrolled
    first = page.get_by_role("tab", name="Compression").bounding_box()
    assert first and first["y"] + first["height"] < 800, first
    # bytes/token per text (the first table of the open tab): fits the page width
    table = page.locator('[data-testid="stDataFrame"]').filter(visible=True).first
    box, main = table.bounding_box(), page.locator('[data-testid="stMainBlockContainer"]').bounding_box()
    assert box and main and box["x"] + box["width"] <= main["x"] + main["width"] + 1
    screenshot(page, artifacts / "change_extend_llama3_est.png")
    page.get_by_role("tab", name="Before and after").click()
    expect(page.get_by_role("heading", name="Before and after")).to_be_visible()
    expect(page.get_by_text("Continued BPE training (", exact=False).first).to_be_visible()

    page.get_by_role("tab", name="Export").click()
    page.get_by_role("button", name="Build the extended tokenizer").click()
    wait_idle(page, timeout=300_000)
    path = download(page, "Download zip (Hugging Face folder)", artifacts / "extend_llama3_est.zip", 300_000)
    with zipfile.ZipFile(io.BytesIO(path.read_bytes())) as zf:
        names = zf.namelist()
        tj = next(n for n in names if n.endswith("/tokenizer.json"))
        report = json.loads(zf.read(next(n for n in names if n.endswith("extension_report.json"))))
        tok = tokenizers.Tokenizer.from_str(zf.read(tj).decode("utf-8"))
    assert report["method"] == "continued" and report["added"] == 1000 and report["unreachable_added"] == 0
    assert tok.get_vocab_size() == 128256 + 1000
    assert tok.token_to_id("<|begin_of_text|>") == 128000
    # the CLI's extension_report.json (python -m analysis extend writes the same schema)
    held = report["heldout"]["est_Latn (FLORES held-out)"]
    assert held["bytes_per_token_after"] > held["bytes_per_token_before"]
    assert report["n_requested"] == 1000 and len(report["added_tokens"]) == 1000
    # the edited tokenizer joins the library, one pick away on every page; the preview takes your own text
    page.get_by_role("button", name="Add to library").click()
    wait_idle(page)
    sidebar = page.locator('[data-testid="stSidebar"]')
    expect(sidebar.get_by_text("llama-3.1 +1000 (Continued BPE training)")).to_be_visible(timeout=60_000)
    page.get_by_role("tab", name="Before and after").click()
    own = page.get_by_label("Your own text (empty: the first held-out FLORES sentence)")
    own.fill("Tere hommikust, kallid sõbrad! Täna räägime tokenisaatoritest.")
    own.press("Control+Enter")
    wait_idle(page, timeout=300_000)
    expect(page.get_by_text("Base (27 tokens)")).to_be_visible(timeout=300_000)
    # every method's line is for this text (the naive method builds its tokenizer first: wait for it)
    expect(page.get_by_text(re.compile(r"\(\d+ tokens vs 27\)"))).to_have_count(2, timeout=300_000)
    wait_idle(page, timeout=300_000)
    screenshot(page, artifacts / "change_extend_own_text_added.png")
