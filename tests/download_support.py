"""Recording what a page offers for download in an AppTest run, to compare it with the CLI's output.

`record_downloads(monkeypatch)` returns a dict that fills, while the app runs, with widget key → the bytes of
every `st.download_button` (also under its file name when the button has no key).
"""

from __future__ import annotations

from typing import Any

import pytest
import streamlit
from streamlit.delta_generator import DeltaGenerator


def record_downloads(monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """Patch `st.download_button` and the containers' `download_button` to record their data (the buttons still
    render). `st.download_button` is a method bound when streamlit is imported, so it is patched on its own."""
    got: dict[str, bytes] = {}
    real = DeltaGenerator.download_button
    real_main = streamlit.download_button

    def keep(label: str, data: Any, file_name: str | None, kwargs: dict[str, Any]) -> None:
        raw = data() if callable(data) else data
        got[kwargs.get("key") or file_name or label] = raw.encode() if isinstance(raw, str) else bytes(raw)

    def record(self, label, data, file_name=None, *args: Any, **kwargs: Any):
        keep(label, data, file_name, kwargs)
        return real(self, label, data, file_name, *args, **kwargs)

    def record_main(label, data, file_name=None, *args: Any, **kwargs: Any):
        keep(label, data, file_name, kwargs)
        return real_main(label, data, file_name, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "download_button", record)
    monkeypatch.setattr(streamlit, "download_button", record_main)
    return got


def without(doc: Any, keys: set[str], suffix: str | None = None) -> Any:
    """A JSON document with the keys named in `keys` (or ending in `suffix`) removed at every depth (timings,
    paths of temporary folders), for comparing two runs of the same inputs."""
    if isinstance(doc, dict):
        return {
            k: without(v, keys, suffix)
            for k, v in doc.items()
            if k not in keys and not (suffix and k.endswith(suffix))
        }
    if isinstance(doc, list):
        return [without(v, keys, suffix) for v in doc]
    return doc


def without_timings(doc: Any) -> Any:
    """A JSON document without its wall-clock measurements (`seconds`, `*_seconds`), which differ run to run."""
    return without(doc, {"seconds"}, "_seconds")
