"""Real browser, workspaces (issue 53): an uploaded tokenizer and a typed text too long for the URL are still there
after a reload, and in a new server process on the same data folder (what a restart keeps is what is on disk).

The journey starts on the session's server (its data folder is the browser tests' own, `e2e_support.server_data`), so only the second
server is started here; the new process shares nothing with the first but the folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from e2e_support import mark, server_data, wait_idle, wait_rerun
from playwright.sync_api import Page, expect

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "badinput"))
from bad_files import tokenizer_doc  # noqa: E402

#: 2,400 characters: more than a URL carries, so only the workspace can bring it back
TEXT = ("Tere hommikust! Typed once, kept by the workspace. " * 50)[:2400]


def _check(page: Page) -> None:
    """The upload is in the sidebar library and the Playground shows the typed text."""
    wait_idle(page)
    sidebar = page.locator('[data-testid="stSidebar"]')
    expect(sidebar.get_by_text("kept-upload", exact=True)).to_be_visible()
    expect(page.get_by_label("Text", exact=True)).to_have_value(TEXT)


def test_a_workspace_survives_a_reload_and_a_server_restart(page: Page, app_url, serve_app, artifacts):
    env = {"TOKLAB_DATA": server_data()}  # the session server's data folder
    page.goto(app_url + "/inspect")
    wait_idle(page)
    page.get_by_role("tab", name="Upload").click()
    since = mark(page)
    page.locator('[data-testid="stMain"] [data-testid="stFileUploaderDropzoneInput"]').set_input_files(
        files=[
            {
                "name": "kept-upload.json",
                "mimeType": "application/json",
                "buffer": json.dumps(tokenizer_doc()).encode(),
            }
        ]  # fmt: skip
    )
    wait_rerun(page, since)
    since = mark(page)
    page.get_by_role("button", name="Add upload to library").click()
    wait_rerun(page, since)
    # to the Playground through the menu: the workspace id stays in the URL
    nav = page.locator('[data-testid="stTopNav"] [data-testid="stTopNavSection"]').filter(
        has_text="Look inside"
    )
    nav.click()
    page.get_by_role("menuitem", name="Playground").click()
    wait_idle(page)
    expect(page.get_by_role("heading", name="Playground")).to_be_visible()
    box = page.get_by_label("Text", exact=True)
    box.fill(TEXT)
    box.press("Control+Enter")
    page.wait_for_url(lambda u: "ws=" in u and "text=" not in u)
    wait_idle(page)
    ws = parse_qs(urlparse(page.url).query)["ws"][0]
    page.reload()
    _check(page)
    with serve_app("streamlit-e2e-workspace.log", env) as url:  # a new server process, the same data folder
        page.goto(f"{url}/playground?ws={ws}")
        _check(page)
        page.screenshot(path=str(artifacts / "workspace_restart.png"))
