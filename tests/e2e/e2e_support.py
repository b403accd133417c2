"""Helpers for real-browser tests: drive the Streamlit app through Playwright (the fixtures are in
tests/e2e/conftest.py, paths in tests/support.py).

Every helper waits on a condition, never on a fixed pause: `wait_idle` on the app having finished a whole run
(see its docstring), `choose` on the dropdown's option list being open before it picks. Time limits are only
upper bounds for a hang, sized for a cold, loaded 2-core machine.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from google.protobuf.message import DecodeError
from playwright.sync_api import Locator, Page, WebSocket, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

#: The longest a page's run may take before a helper gives up (a cold, loaded 2-core machine).
RUN_TIMEOUT_MS = 180_000

#: No placeholder left (Streamlit shows one until an element's lazily loaded front-end code has arrived).
NO_SKELETON_JS = (
    """() => !document.querySelector('[data-testid="stSkeleton"], [data-testid="stAppSkeleton"]')"""
)

#: True when the app has finished a whole run: connected, no script running, no status widget, the sidebar
#: library (the frame draws it last, in every run) present and current, and no element left stale. A rerun that
#: `st.rerun()` starts leaves the previous run's elements stale until it ends, and the first run of a fresh
#: server's deep link (`ui/__init__.py` hands it to app.py with a rerun) draws no library, so neither of those
#: short "not running" gaps between two runs passes.
_IDLE_JS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  if (!app || app.getAttribute('data-test-connection-state') !== 'CONNECTED') return false;
  if (app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  const status = document.querySelector('[data-testid="stStatusWidget"]');
  if (status && status.offsetParent !== null) return false;
  if (document.querySelector('[data-testid="stElementContainer"][data-stale="true"]')) return false;
  const side = document.querySelector('[data-testid="stSidebar"]');
  return !!side && [...side.querySelectorAll('[data-testid="stMarkdownContainer"] h3')]
    .some(h => h.textContent.trim() === 'Tokenizer library');
}"""


#: How the server says a run ended, other than stopped early for the next run of its chain (`st.rerun()`, a
#: newer rerun request): the run whose result the browser then shows.
_RUN_ENDS = {
    ForwardMsg.FINISHED_SUCCESSFULLY,
    ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY,
    ForwardMsg.FINISHED_WITH_COMPILE_ERROR,
}


class RunTracker:
    """The app's runs as the browser's websocket carries them: every rerun request the page sends (a widget
    changed, a button pressed, a page opened), every run the server starts, every run that ends.

    The DOM alone cannot tell "idle" from "a rerun was requested and the server has not started it yet": right
    after a click the app still shows the previous run, not running. The message stream can: the app is settled
    when the last run that ended (`_RUN_ENDS`) came after the last request the page sent and after the last run
    the server started. Messages are numbered in the order Playwright reports them."""

    def __init__(self) -> None:
        self._seq = 0
        self.requested = self.started = self.ended = -1

    def attach(self, ws: WebSocket) -> None:
        """Follow one websocket of the page (a new one opens on each navigation)."""
        ws.on("framesent", self._sent)
        ws.on("framereceived", self._received)

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _sent(self, payload: bytes | str) -> None:
        if isinstance(payload, bytes):
            try:
                if BackMsg.FromString(payload).HasField("rerun_script"):
                    self.requested = self._next()
            except DecodeError:
                pass

    def _received(self, payload: bytes | str) -> None:
        if isinstance(payload, bytes):
            try:
                msg = ForwardMsg.FromString(payload)
            except DecodeError:
                return
            kind = msg.WhichOneof("type")
            if kind == "new_session":
                self.started = self._next()
            elif kind == "script_finished" and msg.script_finished in _RUN_ENDS:
                self.ended = self._next()

    @property
    def seq(self) -> int:
        """The number of the last message counted (a mark to compare `requested` with)."""
        return self._seq

    def settled(self) -> bool:
        """No rerun requested and not yet ended, no run going."""
        return self.ended > max(self.requested, self.started) or self.requested == self.started == -1


def track_runs(page: Page) -> Page:
    """Give `page` a `RunTracker` (before its first navigation), which `wait_idle` then consults."""
    tracker = RunTracker()
    page.on("websocket", tracker.attach)
    page._toklab_runs = tracker  # noqa: SLF001 - a test-side attribute on the sync Page wrapper
    return page


def wait_idle(page: Page, timeout: int = RUN_TIMEOUT_MS) -> None:
    """Wait until the app has finished a whole run and shows its result.

    On a page with a `RunTracker` (every test page: see tests/e2e/conftest.py) this first waits until every
    rerun the page is known to have requested has ended on the server, then for the DOM condition in `_IDLE_JS`
    (the browser has drawn that run). Right after an action the request may not have been sent (or reported) yet:
    after an action that reruns the app, use `wait_rerun`. Playwright reports websocket frames while the test
    waits in one of its calls, so the loop waits in short `wait_for_timeout` steps until the tracker is settled."""
    deadline = time.monotonic() + timeout / 1000
    tracker: RunTracker | None = getattr(page, "_toklab_runs", None)
    while tracker is not None and not tracker.settled():
        if time.monotonic() > deadline:
            raise PlaywrightTimeout(f"the app's run did not end within {timeout} ms")
        page.wait_for_timeout(50)
    left_ms = max(1_000, int((deadline - time.monotonic()) * 1000))
    page.wait_for_function(_IDLE_JS, timeout=left_ms, polling=100)


def mark(page: Page) -> int:
    """Where the page's run tracker is now: give it to `wait_rerun` after an action that makes the app rerun."""
    tracker: RunTracker | None = getattr(page, "_toklab_runs", None)
    return tracker.seq if tracker is not None else -1


def wait_rerun(page: Page, since: int, timeout: int = RUN_TIMEOUT_MS) -> None:
    """After an action that makes the app rerun (taken after `since = mark(page)`): wait until the page has sent
    that rerun request and its run has ended, then for `wait_idle`.

    The browser sends the request a moment after the action returns, and Playwright may report the frame after
    that: until then the tracker looks settled. Only the caller knows a request is coming, so only it can wait
    for one (an action that changes nothing, e.g. choosing the option already chosen, sends none)."""
    tracker: RunTracker | None = getattr(page, "_toklab_runs", None)
    deadline = time.monotonic() + timeout / 1000
    while tracker is not None and tracker.requested <= since:
        if time.monotonic() > deadline:
            raise PlaywrightTimeout(f"the app was not asked to rerun within {timeout} ms")
        page.wait_for_timeout(50)
    wait_idle(page, max(1_000, int((deadline - time.monotonic()) * 1000)))


def choose(
    page: Page, box: Locator, option: str, timeout: int = RUN_TIMEOUT_MS, *, verify: bool = False
) -> None:
    """Pick `option` in a selectbox or multiselect: wait for the app to be idle and the box to be there, open its
    list, and click the option once the list shows it; then, unless it was chosen already (`aria-selected`), wait
    for the rerun the choice starts. A rerun that closes the list before the option is clicked (a fragment) is
    met by opening it again, until `timeout`. With `verify` (a selectbox that keeps its choice), the box must show
    `option` once the app is idle again, else it is chosen again (and the retry is printed to the test's log)."""
    deadline = time.monotonic() + timeout / 1000
    wait_idle(page, timeout)
    expect(box).to_be_visible(timeout=timeout)
    item = page.get_by_role("option", name=option, exact=True)
    while True:
        left_ms = max(1_000, int((deadline - time.monotonic()) * 1000))
        box.click(timeout=left_ms)
        try:
            # the list opens within a frame or two of the click; a rerun can close it again
            expect(item).to_be_visible(timeout=min(left_ms, 10_000))
            already = item.get_attribute("aria-selected", timeout=min(left_ms, 10_000)) == "true"
            since = mark(page)
            item.click(timeout=min(left_ms, 10_000))
            if already:
                page.keyboard.press("Escape")  # the list of a selectbox may stay open on its own value
                wait_idle(page, left_ms)
            else:
                wait_rerun(page, since, left_ms)
            if verify and box.get_by_role("combobox").input_value(timeout=min(left_ms, 10_000)) != option:
                print(f"choose: {option!r} was not kept by the page; choosing it again")
                raise AssertionError(f"{option!r} not kept")
            return
        except (AssertionError, PlaywrightTimeout):
            if time.monotonic() > deadline:
                raise
            page.keyboard.press("Escape")
            wait_idle(page, left_ms)


def set_number(page: Page, label: str, value: int) -> None:
    """Type `value` into the number field labelled `label` and commit it (Enter), waiting for the rerun."""
    box = page.get_by_role("spinbutton", name=label)
    box.fill(str(value))
    since = mark(page)
    box.press("Enter")
    wait_rerun(page, since)


def add_example(page: Page, name: str) -> None:
    """Add an example tokenizer to the session library through the sidebar."""
    sidebar = page.locator('[data-testid="stSidebar"]')
    choose(page, sidebar.locator('[data-testid="stSelectbox"]').filter(has_text="Add an example"), name)
    wait_idle(page)
    since = mark(page)
    sidebar.get_by_role("button", name="Add", exact=True).click()
    wait_rerun(page, since)
    # the library's entry (its name in bold), not the dropdown's shown value, which has the same text
    entry = sidebar.locator('[data-testid="stMarkdownContainer"] strong').get_by_text(name, exact=True)
    expect(entry).to_be_visible(timeout=RUN_TIMEOUT_MS)


def pick_tokenizer(page: Page, name: str) -> None:
    """Choose `name` in the page's first selectbox (the tokenizer picker)."""
    choose(page, page.locator('[data-testid="stMain"] [data-testid="stSelectbox"]').first, name)
    wait_idle(page)


def download(page: Page, button: str, path: Path, timeout: int = 120_000) -> Path:
    """Click a download button and save what the browser receives to `path`."""
    with page.expect_download(timeout=timeout) as dl:
        page.get_by_role("button", name=button).click()
    dl.value.save_as(path)
    return path


def screenshot(page: Page, path: Path, max_height: int = 9000) -> Path:
    """A screenshot of the whole page: the viewport is stretched to the height of Streamlit's scrolling main
    area for the shot (a plain full-page screenshot stops at the viewport), then put back."""
    size = page.viewport_size or {"width": 1400, "height": 1000}
    height = page.evaluate(
        '() => Math.max(...[...document.querySelectorAll(\'[data-testid="stMain"], '
        '[data-testid="stAppViewContainer"], [data-testid="stSidebarContent"]\')].map(e => e.scrollHeight))'
    )
    page.set_viewport_size(
        {"width": size["width"], "height": min(max(size["height"], int(height) + 40), max_height)}
    )
    try:
        # charts re-layout to the new size on the next frames: wait for two of them, then for the app to be idle
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        wait_idle(page)
        # an element whose front-end code is still loading shows a grey placeholder: the shot waits for the code
        page.wait_for_function(NO_SKELETON_JS, polling="raf", timeout=60_000)
        page.screenshot(path=str(path))
    finally:
        page.set_viewport_size(size)
    return path


def server_data() -> str:
    """The data folder (`TOKLAB_DATA`) of the app servers the browser tests start: one of their own in the run's
    cache, so that their job workers never take the jobs the other tests of the run queue in theirs."""
    return str(Path(os.environ["TOKLAB_TEST_RUN_CACHE"]) / "e2e-workspaces")
