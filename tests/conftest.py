"""Generic fixtures for every test (shared tokenizers; AppTest runs pages inside the app.py frame). Helpers (paths, example tokenizers, FLORES lines) live in tests/support.py;
the real-browser fixtures live in tests/e2e/conftest.py."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.runtime.pages_manager import PagesManager
from support import load_shared

from analysis import LoadedTokenizer

#: Set by the first process of a run (the controller under pytest-xdist), inherited by its workers and servers.
_RUN_CACHE = "TOKLAB_TEST_RUN_CACHE"
_OWNS_CACHE = pytest.StashKey[bool]()


def pytest_configure(config: pytest.Config) -> None:
    """Give the whole run one empty disk cache (`TOKLAB_CACHE`), as a freshly booted machine has.

    Without it a test could pass only because an earlier run (or another test file) filled the user's
    `~/.cache/tokenizer-lab`: every run now starts cold, whatever the machine did before. Worker processes and the
    Streamlit servers the browser tests start inherit the same folder through the environment, so one run
    computes each cached result once. Tests that need a cache of their own still set `TOKLAB_CACHE` themselves.
    """
    if not os.environ.get(_RUN_CACHE):
        os.environ[_RUN_CACHE] = tempfile.mkdtemp(prefix="toklab-test-cache-")
        config.stash[_OWNS_CACHE] = True
    os.environ["TOKLAB_CACHE"] = str(Path(os.environ[_RUN_CACHE]))


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the run's disk cache in the process that made it (the last to finish)."""
    if config.stash.get(_OWNS_CACHE, False):
        shutil.rmtree(os.environ.pop(_RUN_CACHE), ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`TOKLAB_TEST_ORDER=shuffle:SEED` runs the collected tests in a seeded random order (`reverse` backwards):
    the check that no test depends on another having run first (`bash scripts/test.sh` with it set)."""
    how = os.environ.get("TOKLAB_TEST_ORDER", "").strip()
    if how == "reverse":
        items.reverse()
    elif how.startswith("shuffle:"):
        random.Random(how.removeprefix("shuffle:")).shuffle(items)


# the app builds the example gallery in the background at a server's first start: never inside the test suite
os.environ.setdefault("TOKLAB_GALLERY_AUTOSTART", "0")


@pytest.fixture(scope="session")
def shared_tokenizer() -> Callable[[str], LoadedTokenizer]:
    """A function name → LoadedTokenizer for the shared assets (cached for the session)."""
    return load_shared


@pytest.fixture(autouse=True, scope="session")
def apptest_runs_like_a_warm_server() -> Iterator[None]:
    """Let AppTest run every page inside the app.py frame, as a running server does.

    A server leaves Streamlit's legacy "pages/ folder" mode once, on its first request (`ui/__init__.py`); AppTest
    resets `PagesManager.uses_pages_directory` before every run, so without this each rerun would execute the page
    file alone (no frame, no error boundary, no sidebar). The first request of a fresh server is tested on its own,
    in a fresh process (tests/app/test_app_pages.py::test_first_deep_link_of_a_fresh_server_runs_in_the_frame).
    """
    original = PagesManager.__init__

    def init(self: PagesManager, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    PagesManager.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        PagesManager.__init__ = original  # type: ignore[method-assign]
