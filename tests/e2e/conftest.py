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
from playwright.sync_api import expect
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
#: How long an `expect(...)` waits by default: a page's first run on a busy 2-core machine can take a minute.
EXPECT_TIMEOUT_MS = 90_000
expect.set_options(timeout=EXPECT_TIMEOUT_MS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test under tests/e2e as `e2e` (a test cannot be left out of the marker by mistake)."""
    for item in items:
        if HERE in Path(item.fspath).resolve().parents:
            item.add_marker(pytest.mark.e2e)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(log_name: str) -> Iterator[str]:
    """Run `streamlit run app.py` on a free 127.0.0.1 port (log in `log_name`) and yield its URL; stop it after."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: install Debian chromium (bash .ci/run does)")
    port = _free_port()
    log_path = ROOT / log_name
    log = open(log_path, "w")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),
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
        deadline = time.monotonic() + 90
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
def app_url() -> Iterator[str]:
    """One server for the whole session: its URL."""
    with serve("streamlit-e2e.log") as url:
        yield url


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
def artifacts() -> Path:
    """Folder for screenshots and downloads kept after the run."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
