"""Real browser, hostile uploads (issue 12): a tokenizer whose one id is 2,000,000,000 gives an error box and leaves
the library as it was; HTML in an uploaded file's name is shown as text, never run; path fields are off; the library's save box, drawn when opened, saves the upload under its name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from e2e_support import download, mark, wait_idle, wait_rerun
from playwright.sync_api import Page, expect

from analysis.tokenizer.sources import load_library_zip

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "badinput"))
from bad_files import sparse_ids_doc, tokenizer_doc  # noqa: E402


def _upload(page: Page, name: str, data: bytes) -> None:
    """Open the Upload tab of Load & inspect, give the file to its uploader and add it to the library.

    Each step waits for the run it starts (`mark` / `wait_rerun`): a click on "Add upload to library" sent before
    the upload's own run has carried the file to the script found no file (cold run I, stop 31)."""
    wait_idle(page)
    page.get_by_role("tab", name="Upload").click()
    since = mark(page)
    page.locator('[data-testid="stMain"] [data-testid="stFileUploaderDropzoneInput"]').set_input_files(
        files=[{"name": name, "mimeType": "application/json", "buffer": data}]
    )
    wait_rerun(page, since)
    since = mark(page)
    page.get_by_role("button", name="Add upload to library").click()
    wait_rerun(page, since)


def test_hostile_uploads_in_a_real_browser(page: Page, app_url, artifacts):
    page.goto(app_url + "/inspect")
    wait_idle(page)
    sidebar = page.locator('[data-testid="stSidebar"]')
    expect(sidebar.get_by_text("Qwen (embedded)")).to_be_visible(timeout=60_000)

    # the report's 396-byte file: refused at load, with a message, and the library is unchanged
    _upload(page, "tokenizer.json", json.dumps(sparse_ids_doc()).encode())
    expect(page.locator('[data-testid="stAlertContentError"]').filter(has_text="not dense")).to_be_visible(
        timeout=60_000
    )
    expect(sidebar.get_by_text("tokenizer", exact=True)).to_have_count(0)

    # HTML in the file name: shown as text in the sidebar, no element created, no script run
    name = "<img src=x onerror=window.__pwned=1>.json"  # browsers send quotes in file names as %22
    _upload(page, name, json.dumps(tokenizer_doc()).encode())
    expect(sidebar.get_by_text("<img src=x onerror=window.__pwned=1>", exact=True)).to_be_visible(
        timeout=60_000
    )
    assert sidebar.locator("img[src='x']").count() == 0
    assert page.evaluate("window.__pwned") is None

    # server-side paths are off by default: the path tab explains instead of offering a field
    page.get_by_text("Load a tokenizer", exact=True).click()  # the loader folds away once the library grows
    page.get_by_role("tab", name="Local folder or file").click()
    expect(page.get_by_text("Server-side paths are off", exact=False).first).to_be_visible()
    page.screenshot(path=str(artifacts / "bad_uploads.png"), full_page=True)

    # the library's save box draws its controls when opened (a rerun, ui/expanders.py); its zip holds the upload
    # under the name the sidebar shows, HTML and all
    since = mark(page)
    sidebar.get_by_text("Save or restore this library", exact=True).click()
    wait_rerun(page, since)
    since = mark(page)
    sidebar.get_by_role("button", name="Prepare library zip").click()
    wait_rerun(page, since)
    saved = download(page, "Download library (.zip)", artifacts / "library.zip")
    assert [n for n, _ in load_library_zip(saved.read_bytes())] == ["<img src=x onerror=window.__pwned=1>"]
    expect(sidebar.get_by_text("Restore a saved library (.zip)")).to_be_visible()
