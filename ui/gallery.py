"""The example gallery's build: a job of the queue (kind ``gallery``, :func:`analysis.views.app_jobs.gallery_job`)
run by a worker at the background priority (it yields to users' jobs), never in the server. The app submits it
once per server (at its first start, from app.py) when the disk store lacks entries; the job belongs to the
server's own workspace (its id kept in ``<TOKLAB_DATA>/gallery-workspace``), so every browser sees the same build
and a restarted server finds it again."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import streamlit as st

from analysis.core import paths
from analysis.core.outputs import atomic_write_text
from analysis.core.workspace import default_store, valid_id
from analysis.jobs.queue import BACKGROUND_PRIORITY, Job, default_jobs
from analysis.views.gallery import autostart_enabled, read_gallery
from ui.workspace import STORE_ERRORS

#: The file (under the data folder) that keeps the id of the server's workspace for the gallery's build.
WORKSPACE_FILE = "gallery-workspace"


@st.cache_resource(show_spinner=False)
def _build_state() -> dict[str, Any]:
    """One state per server: whether the build was looked at, its job (workspace and id), an error."""
    return {"checked": False, "ws": None, "job": None, "error": None}


def gallery_workspace() -> str:
    """The server's workspace for the gallery's build (created once, its id kept in the data folder)."""
    marker = paths.data_dir() / WORKSPACE_FILE
    ws = ""
    with contextlib.suppress(OSError):
        ws = marker.read_text(encoding="ascii").strip()
    if not (valid_id(ws) and default_store().exists(ws)):
        ws = default_store().create()
        atomic_write_text(marker, ws + "\n")
        with contextlib.suppress(OSError):
            os.chmod(marker, 0o600)
    return ws


def start_build(force: bool = False) -> dict[str, Any]:
    """Submit the gallery's build once per server (when `TOKLAB_GALLERY_AUTOSTART` allows, or `force`) if entries
    are missing; the state. The same missing entries make the same job (it runs once)."""
    state = _build_state()
    if not (force or (autostart_enabled() and not state["checked"])):
        return state
    state["checked"] = True
    try:
        g = read_gallery()
        missing = sorted(g.missing + g.models_missing)
        if g.data_key is not None and missing:
            ws = gallery_workspace()
            job = default_jobs().submit(ws, "gallery", {"data": g.data_key, "missing": missing},
                                        label="Example gallery", priority=BACKGROUND_PRIORITY)  # fmt: skip
            state.update(ws=ws, job=job.id, error=None)
    except STORE_ERRORS as e:
        state["error"] = str(e)
    return state


def build_job() -> Job | None:
    """The gallery's build job of this server (None: none submitted)."""
    state = _build_state()
    if not state["job"]:
        return None
    try:
        return default_jobs().get(state["ws"], state["job"])
    except STORE_ERRORS:
        return None
