"""Real-browser fixtures for tests/e2e: one Streamlit server on a free 127.0.0.1 port for the session, Debian
chromium driven by pytest-playwright, a folder for screenshots and downloads. Every test collected here is
marked `e2e`, so `pytest -m "not e2e"` leaves them out."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from e2e_support import RUN_TIMEOUT_MS, server_data, track_runs, wait_idle
from playwright.sync_api import Browser, BrowserContext, expect
from support import ROOT

HERE = Path(__file__).resolve().parent
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROME_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = ROOT / "test-artifacts"
#: How long an `expect(...)` and an action (click, fill) wait by default: upper bounds for a hang, sized for a
#: page's first run on a cold, loaded 2-core machine (every helper waits on a condition, not on this time).
EXPECT_TIMEOUT_MS = RUN_TIMEOUT_MS
expect.set_options(timeout=EXPECT_TIMEOUT_MS)
#: How long the server may take to answer its health check (imports on a cold disk with no bytecode cache).
SERVER_START_S = 180


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test under tests/e2e as `e2e` (a test cannot be left out of the marker by mistake), and put them
    in one pytest-xdist group, so that under `-n N --dist loadgroup` they share one worker: one server, one
    browser for all journeys."""
    for item in items:
        if HERE in Path(item.fspath).resolve().parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.xdist_group("e2e"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """When a journey fails, keep what its tab showed: a screenshot in test-artifacts/ and the page's text as a
    section of the failure report (a CI log then says what the user would have seen)."""
    outcome = yield
    report = outcome.get_result()
    page = getattr(item, "funcargs", {}).get("page")
    if report.when != "call" or not report.failed or page is None or page.is_closed():
        return
    try:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"failed-{item.name[:80]}.png"), full_page=True, timeout=20_000)
        text = page.locator("body").inner_text(timeout=20_000)
    except Exception as e:  # noqa: BLE001 - a report must not fail on a closing tab
        text = f"(the page could not be read: {e})"
    report.sections.append(("what the page showed", f"{page.url}\n{text[-6000:]}"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(log_name: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """Start the app as `scripts/start.sh` does (`scripts/serve.py`: a warm process, then `streamlit run app.py`) on a
    free 127.0.0.1 port (log in `log_name`; `env` added to this process's environment) and yield its URL; stop it
    after."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: install Debian chromium (bash .ci/run does)")
    port = _free_port()
    log_path = ROOT / log_name
    log = open(log_path, "w")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKLAB_DATA": server_data(), **(env or {})}
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "scripts" / "serve.py"),
            "--server.headless",
            "true",
            "--server.address",
            "127.0.0.1",
            "--server.port",
            str(port),
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            try:
                if urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("streamlit did not start: " + log_path.read_text())
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="session")
def shared_context(browser: Browser, browser_context_args: dict) -> Iterator[BrowserContext]:
    """One browser context (one browser profile) for every journey, as a user's browser keeps one: each test
    opens its own tab in it, so each is a new Streamlit session, while Streamlit's front-end code stays in the
    profile's HTTP and compiled-code caches. A new context per test parsed and compiled that code again on every
    page load: 2.9 s of chromium CPU per load against 1.1 s in a shared one (5 pages, 2026-11-27); over the 24
    journeys (one process, idle) 262 → 252 s, as most of chromium's work is drawing the app's reruns.

    Actions wait up to `EXPECT_TIMEOUT_MS` like `expect` (30 s is too short for a click that waits for a page's
    first run on a cold, loaded machine), and every page it opens is followed by a `RunTracker` (so that
    `wait_idle` right after an action waits for the run that action started)."""
    context = browser.new_context(**browser_context_args)
    context.set_default_timeout(EXPECT_TIMEOUT_MS)
    context.set_default_navigation_timeout(EXPECT_TIMEOUT_MS)
    context.on("page", track_runs)
    yield context
    context.close()


@pytest.fixture(scope="session")
def app_url(shared_context: BrowserContext) -> Iterator[str]:
    """One server for the whole session, warmed before the first test: its URL.

    A fresh server's first request runs twice (Streamlit's legacy pages/ mode hands over to app.py, see
    `ui/__init__.py`) and a fresh browser builds its font and profile caches and loads the front end; all happen
    here, in a tab that loads Home and waits until the app is idle, so that no test's first steps pay for a cold
    machine.
    """
    with serve("streamlit-e2e.log") as url:
        page = shared_context.new_page()
        try:
            page.goto(url, timeout=RUN_TIMEOUT_MS)
            wait_idle(page)
        finally:
            page.close()
        yield url


@pytest.fixture
def serve_app():
    """:func:`serve` itself, for a test that needs a server with an environment of its own."""
    return serve


@pytest.fixture
def fresh_app_url() -> Iterator[str]:
    """A server of its own that has answered no request yet (for first-request behaviour): its URL."""
    with serve("streamlit-e2e-fresh.log") as url:
        yield url


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    """Drive Debian's chromium (no `playwright install`)."""
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROME_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict) -> dict:
    """A large viewport and downloads allowed."""
    return {**browser_context_args, "viewport": {"width": 1400, "height": 1000}, "accept_downloads": True}


@pytest.fixture
def context(shared_context: BrowserContext) -> Iterator[BrowserContext]:
    """The journeys' one context (:func:`shared_context`) in place of pytest-playwright's context per test; every
    tab a test opened is closed after it, so the next test starts with none (and a new Streamlit session)."""
    yield shared_context
    for page in list(shared_context.pages):
        page.close()


@pytest.fixture
def artifacts() -> Path:
    """Folder for screenshots and downloads kept after the run."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
