"""Real browser, the test harness itself: the `RunTracker` every test page carries reads the app's runs off the
websocket, so `wait_rerun` after an action waits for the run that action started (issue 18's cold-machine flake: a
filter typed into the previous tokenizer's widgets while the switch was still on its way)."""

from __future__ import annotations

import re

from e2e_support import RunTracker, mark, wait_idle, wait_rerun
from playwright.sync_api import Page, expect


def test_the_tracker_follows_a_widget_change_to_the_end_of_its_run(page: Page, app_url):
    runs: RunTracker = page._toklab_runs  # noqa: SLF001 - set by tests/e2e/conftest.py on every page
    page.goto(app_url + "/token_health")
    wait_idle(page)
    assert (
        runs.requested > -1 and runs.started > runs.requested and runs.ended > runs.started
    )  # the first run
    since = mark(page)
    box = page.get_by_label("Search (readable or raw form)")
    box.fill("im_")
    box.press("Enter")
    wait_rerun(page, since)  # no content wait: the tracker alone must hold until the search's run has ended
    assert runs.requested > since and runs.ended > runs.requested and runs.settled()
    expect(page.get_by_text(re.compile(r"^[1-9] of 151,646 ids$"))).to_be_visible()


def test_a_fresh_tracker_is_settled_and_a_request_unsettles_it():
    runs = RunTracker()
    assert runs.settled()
    runs.requested = runs._next()  # noqa: SLF001 - drive the bookkeeping as frames would
    assert not runs.settled()
    runs.started = runs._next()  # noqa: SLF001
    assert not runs.settled()
    runs.ended = runs._next()  # noqa: SLF001
    assert runs.settled()
