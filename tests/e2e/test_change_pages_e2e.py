"""Real browser: the Change pages added after the first release — dynamic tokenization, token reuse (R-BPE)
and source-attributed BPE — each driven once end to end, with their downloads checked."""

from __future__ import annotations

import io
import json
import re
import zipfile

import tokenizers
from e2e_support import add_example, download, pick_tokenizer, screenshot, wait_idle
from playwright.sync_api import Page, expect


def _zip_member(path, suffix: str) -> bytes:
    """The bytes of the first member of a zip file whose name ends with `suffix`."""
    with zipfile.ZipFile(io.BytesIO(path.read_bytes())) as zf:
        return zf.read(next(n for n in zf.namelist() if n.endswith(suffix)))


def test_dynamic_tokenization_page(page: Page, app_url, artifacts):
    page.goto(app_url + "/dynamic")
    wait_idle(page)
    add_example(page, "llama-2")
    pick_tokenizer(page, "llama-2")
    expect(page.get_by_text("Tokens before")).to_be_visible(timeout=120_000)
    # the first view opens on the merges the 10% target needs (Estonian, word boundary), never "not reachable"
    heading = page.get_by_text(re.compile(r"^Merges \(\d+\)$"))
    expect(heading).to_be_visible(timeout=120_000)
    wait_idle(page)
    k = int(re.search(r"\d+", heading.inner_text()).group())
    needed = page.locator('[data-testid="stMetric"]').filter(has_text="Merges needed")
    assert needed.locator('[data-testid="stMetricValue"]').inner_text() == f"{k:,}"
    expect(page.locator('svg.tl-svg-chart[aria-label="Average sequence length by merges"]')).to_be_visible()
    screenshot(page, artifacts / "change_dynamic_llama2.png")
    path = download(page, "Download JSON", artifacts / "dynamic.json")
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert len(doc["merges"]) == k and doc["boundary"] == "word"
    curve = doc["full_curve"]["merges2seqLen"]
    assert curve == sorted(curve, reverse=True) and curve[k] <= 0.9 * curve[0]


def test_token_reuse_page_trains_and_exports(page: Page, app_url, artifacts):
    page.goto(app_url + "/reuse")
    # the first render classifies the default tokenizer's vocabulary: let it finish before using the sidebar
    expect(page.get_by_text("Reusable ids", exact=True)).to_be_visible(timeout=300_000)
    wait_idle(page)
    add_example(page, "llama-3.1")
    pick_tokenizer(page, "llama-3.1")
    expect(page.get_by_text("Reusable ids", exact=True)).to_be_visible(timeout=120_000)
    page.get_by_role("button", name="Train the new tokenizer").click()
    wait_idle(page, timeout=600_000)
    expect(page.get_by_text("Before / after", exact=True)).to_be_visible(timeout=600_000)
    expect(page.get_by_text("Reused scripts now decode as the target", exact=False)).to_be_visible()
    screenshot(page, artifacts / "change_reuse_llama3_arabic.png")
    path = download(page, "Download the R-BPE tokenizer (.zip)", artifacts / "reuse.zip")
    mapping = json.loads(_zip_member(path, "rbpe_mapping.json"))
    new = tokenizers.Tokenizer.from_str(_zip_member(path, "new_tokenizer/tokenizer.json").decode("utf-8"))
    assert mapping and new.get_vocab_size() > 1000


def test_source_attributed_bpe_page(page: Page, app_url, artifacts):
    page.goto(app_url + "/sabpe")
    wait_idle(page)
    add_example(page, "gpt2")
    pick_tokenizer(page, "gpt2")
    vocab = page.get_by_label("Vocabulary size")
    vocab.fill("800")
    vocab.press("Enter")
    wait_idle(page)
    page.get_by_role("button", name="Train plain BPE and SA-BPE").click()
    wait_idle(page, timeout=600_000)
    expect(page.get_by_text("Comparison on held-out repositories")).to_be_visible(timeout=600_000)
    expect(page.get_by_text("Merge history", exact=True)).to_be_visible()
    screenshot(page, artifacts / "change_sabpe_gpt2.png")
    path = download(page, "Download SA-BPE tokenizer (.zip)", artifacts / "sabpe.zip")
    tok = tokenizers.Tokenizer.from_str(_zip_member(path, "/tokenizer.json").decode("utf-8"))
    assert 700 <= tok.get_vocab_size() <= 900
    assert tok.decode(tok.encode("def main():\n    return 0\n").ids) == "def main():\n    return 0\n"
