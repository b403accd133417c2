"""Real browser: the new views (Vocabulary diff, Chat template, the Playground's live typing and decode box, the
example gallery) and the page frame's top spacing."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from e2e_support import choose, mark, screenshot, wait_idle, wait_rerun
from playwright.sync_api import Page, expect
from support import FLORES, ROOT, TOKENIZERS, load_shared


def test_vocabulary_diff_journey(page: Page, app_url, artifacts):
    page.goto(app_url + "/vocab_diff?t=example:gpt2&t=example:llama-3.1")
    wait_idle(page, 180_000)
    title = page.get_by_role("heading", name="Vocabulary diff")
    expect(title).to_be_visible()
    header = page.locator('[data-testid="stHeader"]').bounding_box()
    gap = title.bounding_box()["y"] - (header["y"] + header["height"])
    assert 0 <= gap < 40, gap  # below the top bar, not hidden by it; 6rem of padding left a wide gap before
    expect(page.get_by_text("Jaccard index").first).to_be_visible(timeout=120_000)
    expect(page.get_by_role("tab", name="Only in gpt2")).to_be_visible()
    expect(page.get_by_role("button", name="Download the tokens only in gpt2 (CSV)")).to_be_visible()
    screenshot(page, artifacts / "vocab_diff.png")


def test_chat_template_journey(page: Page, app_url, artifacts):
    page.goto(app_url + "/chat_template?t=example:qwen3")
    wait_idle(page, 120_000)
    expect(page.get_by_text("of them special (dark)")).to_be_visible(timeout=120_000)
    expect(page.locator(".tl-special").first).to_have_text("<|im_start|>")
    screenshot(page, artifacts / "chat_template.png")


def test_playground_updates_while_typing_and_decodes_ids(page: Page, app_url, artifacts):
    """Typing in the live box updates the page after a pause (no Enter, no blur: the front end's own behaviour, which
    an AppTest cannot show); the decode box commits on Ctrl+Enter. Two tokenizers: the live mode and the decode box
    work per tokenizer (tests/app/test_views_pages.py), and four examples with the embedded default (an estimated
    631 MB) overflow the server's default 512 MB tokenizer budget, so every rerun of the page loaded three of them
    again (7-13 s a step on a loaded machine)."""
    page.goto(app_url + "/playground?t=example:gpt2&t=example:llama-3.1")
    wait_idle(page, 180_000)
    page.get_by_text("Update while typing").click()
    # the toggle's rerun swaps the text area for the live one-line box: wait for that box (an idle app right
    # after the click can still be the run before it, whose text area would swallow the typing)
    box = page.locator('[data-testid="stTextInput"]').get_by_label("Text", exact=True)
    expect(box).to_be_visible()
    wait_idle(page)
    box.fill("")
    box.press_sequentially("tere hommikust", delay=40)  # no Enter, no blur: the pause alone updates
    ids = " ".join(
        map(str, load_shared("gpt2").tokenizer.encode("tere hommikust", add_special_tokens=False).ids)
    )
    expect(page.locator('[data-testid="stCode"]').filter(has_text=ids).first).to_be_visible(timeout=60_000)
    screenshot(page, artifacts / "playground_live.png")
    page.get_by_text("Decode ids → text").click()
    # the box starts on the tokenizer added last (Llama-3.1 here); these are gpt2's ids
    choose(page, page.locator('[data-testid="stSelectbox"]').filter(has_text="Decode with"), "gpt2")
    ids_box = page.get_by_label("Token ids")
    ids_box.fill("15496 11 995")
    since = mark(page)  # new ids in an empty box: committing them reruns the app
    ids_box.press("Control+Enter")
    wait_rerun(page, since)
    expect(page.locator('[data-testid="stCode"]').filter(has_text="Hello, world").first).to_be_visible()
    screenshot(page, artifacts / "playground_decode.png")


def test_gallery_first_view(page: Page, app_url, artifacts):
    page.goto(app_url + "/gallery")
    wait_idle(page, 120_000)
    expect(page.get_by_role("heading", name="Example gallery")).to_be_visible()
    ready = page.get_by_text("The ten languages with the fewest bytes per token")  # the store has entries
    waiting = page.get_by_text(re.compile(r"example tokenizers (and \d+ of \d+ demo models )?ready"))
    expect(waiting.or_(ready).first).to_be_visible()
    if ready.is_visible():  # a stored gallery: its chart is drawn with the page, as an SVG image
        expect(
            page.get_by_role("img", name="Bytes per token on every FLORES-200 language, per tokenizer")
        ).to_be_visible()
    screenshot(page, artifacts / "gallery.png")


CHART = "Bytes per token on every FLORES-200 language, per tokenizer"


def test_a_stored_gallery_is_drawn_with_its_chart_and_no_chart_module(
    page: Page, serve_app, tmp_path, artifacts
):
    """A server whose gallery is stored (two example tokenizers, three FLORES languages, built by the CLI): the
    first view draws the box plot as an SVG image in the page (Streamlit's HTML element would strip SVG: only a
    real browser shows that it survives) and loads no Plotly or data-grid code; the toggle brings the Plotly chart."""
    examples, flores = tmp_path / "examples", tmp_path / "flores"
    examples.mkdir()
    flores.mkdir()
    for name in ("gpt2", "llama-3.1"):
        (examples / name).symlink_to(TOKENIZERS / name, target_is_directory=True)
    for code in ("eng_Latn", "est_Latn", "zho_Hans"):
        (flores / f"{code}.devtest").symlink_to(FLORES / "devtest" / f"{code}.devtest")
    env = {
        "TOKLAB_TOKENIZER_DIRS": str(examples),
        "TOKLAB_FLORES": str(flores),
        "TOKLAB_CACHE": str(tmp_path / "cache"),
        "TOKLAB_MODELS": str(tmp_path / "no-models"),
    }
    built = subprocess.run([sys.executable, "-m", "analysis", "gallery"], cwd=ROOT, env={**os.environ, **env},
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    modules: list[str] = []
    page.on("request", lambda r: modules.append(r.url.rsplit("/", 1)[-1]))
    with serve_app("streamlit-e2e-gallery.log", env) as url:
        page.goto(url + "/gallery")
        wait_idle(page, 120_000)
        chart = page.get_by_role("img", name=CHART)
        expect(chart).to_be_visible()
        assert chart.locator("rect").count() == 2  # a box per stored tokenizer
        expect(page.get_by_text("The ten languages with the fewest bytes per token")).to_be_visible()
        heavy = [m for m in modules if m.startswith(("PlotlyChart.", "DataFrame."))]
        assert not heavy, heavy
        screenshot(page, artifacts / "gallery_stored.png")
        page.get_by_text("Interactive chart", exact=True).click()
        wait_idle(page)
        expect(page.locator('[data-testid="stPlotlyChart"] .main-svg').first).to_be_visible(timeout=60_000)
