"""Capture what a page offers for download in an AppTest run (AppTest has no media server, so the proto holds no
bytes): `capture_downloads(monkeypatch)` returns a dict key → data filled by every st.download_button call."""

from __future__ import annotations

from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator


def capture_downloads(monkeypatch: Any) -> dict[str, Any]:
    """Record the data of st.download_button / container.download_button calls by widget key."""
    seen: dict[str, Any] = {}
    original = DeltaGenerator.download_button
    main = st.download_button

    def method(self: DeltaGenerator, label: str, data: Any, *args: Any, **kwargs: Any) -> Any:
        seen[kwargs.get("key") or label] = data
        return original(self, label, data, *args, **kwargs)

    def module(label: str, data: Any, *args: Any, **kwargs: Any) -> Any:
        seen[kwargs.get("key") or label] = data
        return main(label, data, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "download_button", method)
    monkeypatch.setattr(st, "download_button", module)
    return seen


def without_timings(doc: Any) -> Any:
    """A JSON document without its wall-clock measurements (`seconds`, `*_seconds`), which differ run to run."""
    if isinstance(doc, dict):
        return {
            k: without_timings(v) for k, v in doc.items() if k != "seconds" and not k.endswith("_seconds")
        }
    if isinstance(doc, list):
        return [without_timings(v) for v in doc]
    return doc
