"""Real browser, the Measure group: two tokenizers side by side on all 204 FLORES-200 languages — overview, every
language grouped by script, drill down — and the CSV, JSON and LaTeX downloads.

Two tokenizers, not three: a third one took the page through the same code with a third of the work again (the
Rust encoders over 40 MB of FLORES); the side-by-side views, the legend and the downloads need two: Qwen3 (151k
tokens) and Llama-3.1 (128k), both added from the sidebar, the embedded default taken out of the selection.

Both fast-encoder verdicts are taken before the journey, once per run (support.verified_encoder, shared with
tests/measure/test_fast_encode.py through the run's disk cache, which the server reads): the server then encodes
both with gigatoken instead of comparing both encoders on all 204 languages a second time. The cold path (a
tokenizer verified on the side while it is measured) is the engine's
(tests/measure/test_fast_encode.py::test_a_shadow_compared_verification_switches_to_gigatoken_with_the_same_numbers):
here it was the embedded default's, 204 languages with both encoders, half of the journey's time."""

from __future__ import annotations

import csv
import json
import re

from e2e_support import add_example, download, mark, screenshot, wait_idle, wait_rerun
from playwright.sync_api import Page, expect
from support import load_shared, verified_encoder

NAMES = ("qwen3", "llama-3.1")
DEFAULT = "Qwen (embedded)"
LONG = 900_000  # two tokenizers × 204 languages, cold, on a busy 2-core machine


def test_compare_two_tokenizers_on_all_languages_and_download(page: Page, app_url, artifacts):
    verdicts = {name: verified_encoder(load_shared(name)) for name in NAMES}
    page.goto(app_url + "/compression")
    wait_idle(page)
    for name in NAMES:
        add_example(page, name)  # an added tokenizer joins the page's selection
    toks = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Tokenizers (1–8)")
    since = mark(page)
    toks.get_by_role("button", name=f"Remove {DEFAULT}", exact=True).click()
    wait_rerun(page, since)
    expect(toks.locator(f'[data-tag][aria-label="{DEFAULT}"]')).to_have_count(0)
    for name in NAMES:
        expect(toks.locator(f'[data-tag][aria-label="{name}"]').first).to_be_attached()
    page.get_by_text("All", exact=True).click()
    wait_idle(page)
    expect(page.get_by_text("2 tokenizer(s) × 204 language(s)")).to_be_visible()
    page.get_by_role("button", name="Compute").click()
    expect(page.get_by_text(re.compile(r"^2 tokenizer\(s\) × 204 language\(s\) on"))).to_be_visible(
        timeout=LONG
    )
    wait_idle(page, LONG)

    # overview: the summary, the distributions and the worst 20 languages of each tokenizer
    expect(page.get_by_text("The 20 worst languages per tokenizer", exact=False)).to_be_visible()
    expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_visible()
    screenshot(page, artifacts / "measure_overview_204.png")

    # every language: grouped by script, the tokenizer legend and the value axis at the top
    page.get_by_role("tab", name="Every language").click()
    chart = page.locator('[data-testid="stPlotlyChart"]').filter(has_text="Latin (127)")
    expect(chart).to_be_visible()
    assert all(chart.locator(".legendtext").filter(has_text=n).count() == 1 for n in NAMES)
    screenshot(page, artifacts / "measure_every_language_204.png")

    page.get_by_role("tab", name="Drill down").click()
    expect(page.locator(".tl-spans").first).to_be_visible()
    assert page.locator(".tl-spans").count() == 5  # the 5 worst-compressed sentences, tokenized

    page.get_by_role("tab", name="Download").click()
    rows = list(
        csv.DictReader(download(page, "Download CSV", artifacts / "compression.csv").open(encoding="utf-8"))
    )
    assert len(rows) == 2 * 204 and {r["tokenizer"] for r in rows} == set(NAMES)
    llama_eng = next(r for r in rows if r["tokenizer"] == "llama-3.1" and r["lang"] == "eng_Latn")
    assert round(float(llama_eng["bytes_per_token"]), 3) == 4.862
    for name in NAMES:  # the run's verdicts, as the page reports them
        assert {r["encoder"] for r in rows if r["tokenizer"] == name} == {verdicts[name]["encoder"]}, name
    doc = json.loads(
        download(page, "Download JSON", artifacts / "compression.json").read_text(encoding="utf-8"),
        parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"not strict JSON: {c}")),
    )
    assert len(doc) == 2 * 204
    tex = download(
        page, "Download LaTeX, every language (longtable)", artifacts / "compression-languages.tex"
    )
    body = tex.read_text(encoding="utf-8")
    assert "\\begin{longtable}" in body and "\\endhead" in body
    assert sum(1 for line in body.splitlines() if re.match(r"^[a-z]{3}\\_[A-Z][a-z]{3} &", line)) == 204
    scripts = download(page, "Download LaTeX, per script", artifacts / "compression-scripts.tex")
    lines = [ln for ln in scripts.read_text(encoding="utf-8").splitlines() if ln.endswith("\\\\")]
    assert 2 <= len(lines) <= 8  # a header and one row per script group: fits a page
