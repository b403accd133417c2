"""Helpers shared by the AppTests in tests/app/ (importable from them as `app_support`: pytest puts this folder on
sys.path for its test files)."""

from __future__ import annotations

import base64
import json

import numpy as np
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


def _array(v) -> np.ndarray:
    """A plotly figure array: a list, or Plotly's typed-array form {"dtype", "bdata"} (base64)."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
    return np.asarray(v, dtype=float)


def verification_points(at: AppTest) -> list[float]:
    """The finite y values (max probabilities) of the Under-trained tokens page's verification scatter: one point
    per verified candidate."""
    for c in at.get("plotly_chart"):
        spec = json.loads(c.proto.spec)
        if "Verification" in json.dumps(spec.get("layout", {}).get("title", "")):
            ys = np.concatenate([_array(t.get("y", [])) for t in spec["data"]])
            return [float(y) for y in ys if np.isfinite(y)]
    raise AssertionError("no verification chart")
