"""Real browser, workspace files (issue 53): the app served by `scripts/serve.py` (Streamlit's st.App with the file
route) lists a workspace's model file in the sidebar's workspace panel, and its download link, followed from the
page, hands over the file byte for byte; the same link is refused once the file is deleted."""

from __future__ import annotations

import os

from e2e_support import mark, server_data, wait_idle, wait_rerun
from playwright.sync_api import Page, expect

from analysis.core.workspace import store_at


def test_a_workspace_file_downloads_by_its_link_and_not_after_delete(page: Page, app_url, tmp_path):
    store = store_at(server_data())  # the servers' data folder
    ws = store.create()
    body = os.urandom(300_000)
    (tmp_path / "m.gguf").write_bytes(body)
    store.put_file(ws, "artifact", "smol-et.gguf", {"role": "model"}, tmp_path / "m.gguf")
    page.goto(f"{app_url}/?ws={ws}")
    wait_idle(page)
    sidebar = page.locator('[data-testid="stSidebar"]')
    since = mark(page)
    sidebar.get_by_text("Link, results, export, new, delete").click()
    wait_rerun(page, since)
    link = sidebar.get_by_role("link", name="smol-et.gguf")
    expect(link).to_be_visible()
    href = link.get_attribute("href")
    assert href and href.startswith("/toklab/file/")
    answer = page.request.get(app_url + href)
    assert answer.status == 200 and answer.body() == body
    since = mark(page)
    sidebar.get_by_role("button", name="Delete", exact=True).click()
    wait_rerun(page, since)
    expect(sidebar.get_by_role("link", name="smol-et.gguf")).to_have_count(0)
    assert page.request.get(app_url + href).status == 404
