"""Helpers shared by the AppTests in tests/app/ (importable from them as `app_support`: pytest puts this folder on
sys.path for its test files)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest
from support import ROOT


def open_page(page: str, **query: str | list[str]) -> AppTest:
    """An AppTest of the app (inside the app.py frame) opened on `page` with the given query parameters; no
    exception in that first run."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    return at
