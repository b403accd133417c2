"""The example gallery's background build: started once per server (at its first start, from app.py), computing
the entries the disk store lacks while pages go on serving (`analysis.views.gallery`)."""

from __future__ import annotations

import threading
from typing import Any

import streamlit as st

from analysis.errors import AnalysisError
from analysis.views.gallery import autostart_enabled, build_gallery


@st.cache_resource(show_spinner=False)
def _build_state() -> dict[str, Any]:
    """One state per server: whether the build runs, the entries it computed, its error."""
    return {"running": False, "computed": [], "error": None, "thread": None}


def _run(state: dict[str, Any]) -> None:
    try:
        build_gallery(on_entry=lambda e: state["computed"].append(getattr(e, "name", None) or e.key))
    except AnalysisError as e:  # e.g. no FLORES data: the gallery page says so
        state["error"] = str(e)
    finally:
        state["running"] = False


def start_build(force: bool = False) -> dict[str, Any]:
    """Start the background build once per server (when `TOKLAB_GALLERY_AUTOSTART` allows, or `force`); the state."""
    state = _build_state()
    if (force or autostart_enabled()) and state["thread"] is None:
        state["running"] = True
        state["thread"] = threading.Thread(target=_run, args=(state,), name="toklab-gallery", daemon=True)
        state["thread"].start()
    return state
