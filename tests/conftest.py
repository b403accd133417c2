"""Shared fixtures: where the shared assets live, loaded tokenizers (cached per session), and the real-browser
fixtures for tests/e2e (one Streamlit server on 127.0.0.1, Debian chromium). The only conftest: e2e tests import
their helpers from tests/e2e/e2e_support.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ASSETS = Path(os.environ.get("TOKLAB_ASSETS", ROOT.parent / "shared" / "assets")).resolve()
TOKENIZERS = ASSETS / "tokenizers"
FLORES = ASSETS / "flores200"
ALL_TOKENIZERS = sorted(p.name for p in TOKENIZERS.iterdir()) if TOKENIZERS.is_dir() else []
BPE_TOKENIZERS = [n for n in ALL_TOKENIZERS if n not in ("bert-base-uncased", "pegasus-unigram")]

if not TOKENIZERS.is_dir():
    raise RuntimeError(f"shared assets not found at {ASSETS}; set TOKLAB_ASSETS")


@cache
def load_shared(name: str):
    """Load (once per test session) a tokenizer folder from the shared assets."""
    from analysis import load

    return load(TOKENIZERS / name)


@pytest.fixture(scope="session")
def shared_tokenizer():
    """A function name → LoadedTokenizer for the shared assets (cached)."""
    return load_shared


def flores_lines(lang: str, n: int | None = None) -> list[str]:
    """The devtest lines of one FLORES-200 language (first n)."""
    lines = (FLORES / "devtest" / f"{lang}.devtest").read_text(encoding="utf-8").splitlines()
    return lines[:n] if n else lines


# ---------------------------------------------------------------- real-browser (tests/e2e) fixtures
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def app_url():
    """Start `streamlit run app.py` on a free 127.0.0.1 port and yield its URL."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: install Debian chromium (bash .ci/run does)")
    port = _free_port()
    log_path = ROOT / "streamlit-e2e.log"
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
        deadline = time.time() + 90
        while True:
            try:
                if urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
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
def browser_type_launch_args(browser_type_launch_args):
    """Drive Debian's chromium (no `playwright install`)."""
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROME_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    """A large viewport and downloads allowed."""
    return {**browser_context_args, "viewport": {"width": 1400, "height": 1000}, "accept_downloads": True}


@pytest.fixture
def artifacts() -> Path:
    """Folder for screenshots and downloads kept after the run."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
