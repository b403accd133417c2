"""Generic fixtures for every test (shared tokenizers; AppTest runs pages inside the app.py frame). Helpers (paths, example tokenizers, FLORES lines) live in tests/support.py;
the real-browser fixtures live in tests/e2e/conftest.py."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from streamlit.runtime.pages_manager import PagesManager
from support import load_shared

from analysis import LoadedTokenizer

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
    in a fresh process (tests/test_app_pages.py::test_first_deep_link_of_a_fresh_server_runs_in_the_frame).
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
