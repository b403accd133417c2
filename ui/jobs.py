"""The app's one job panel (the queue is :mod:`analysis.jobs.queue`): a page submits a job with :func:`submit`,
which keeps the job's id in the workspace under the page's key (never only in Session State), and draws
:func:`job_panel` on every run: while the job is queued or running, a fragment polls its record once a second —
state, place in the queue with the estimated start and end, progress with the stage, the log tail, Cancel —
and when it ended, the page shows its result (or its message and "Run again"). A reload, another tab with the
same ``?ws=`` or a restarted server re-attaches to the job the same way.
"""

from __future__ import annotations

import hashlib
from typing import Any

import streamlit as st

from analysis.core import paths
from analysis.core.outputs import json_document
from analysis.core.workspace import WorkspaceStore
from analysis.jobs.queue import AGAIN, USER_PRIORITY, Job, JobStore, default_jobs
from ui.workspace import STORE_ERRORS, current, store

#: How often the panel polls the record (seconds).
POLL_SECONDS = 1.0
#: The workspace input that holds a page's job id: ``job:<key>``.
PREFIX = "job:"
#: Words for the states.
STATE_WORDS = {"queued": "Queued", "running": "Running", "done": "Done", "failed": "Failed",
               "cancelled": "Cancelled", "interrupted": "Interrupted"}  # fmt: skip


def jobs() -> JobStore:
    """The job store of this server (under ``TOKLAB_DATA``)."""
    return default_jobs()


def attached(key: str) -> Job | None:
    """The job the workspace keeps under `key` (None: none, or this workspace cannot see it)."""
    ws = current()
    if not ws:
        return None
    try:
        job_id = store().inputs(ws).get(PREFIX + key)
        return jobs().get(ws, job_id) if isinstance(job_id, str) else None
    except STORE_ERRORS:
        return None


def attach(key: str, job_id: str | None) -> None:
    """Keep `job_id` in the workspace as the page's job under `key` (None: forget it)."""
    ws = current()
    if ws:
        store().put_input(ws, PREFIX + key, job_id)


def submit(
    key: str, kind: str, params: dict[str, Any], *, label: str = "", priority: int = USER_PRIORITY
) -> Job:
    """Submit a job for this workspace (or find the same one already there) and attach it to the page's `key`."""
    job = jobs().submit(current(), kind, params, label=label, priority=priority)
    attach(key, job.id)
    return job


def stored_input(ws_store: WorkspaceStore, ws: str, data: bytes, suffix: str, meta: dict[str, Any]) -> str:
    """Store `data` as an artifact named by its content (``job-inputs/<sha256 prefix><suffix>``) unless it is there;
    its name (what a job's params name)."""
    name = f"job-inputs/{hashlib.sha256(data).hexdigest()[:24]}{suffix}"
    if ws_store.get(ws, "artifact", name) is None:
        ws_store.put(ws, "artifact", name, meta, data)
    return name


def stored_json(doc: dict[str, Any], meta: dict[str, Any]) -> str:
    """A JSON document stored as a job input of this workspace; its name."""
    data = json_document(doc).encode("utf-8")
    return stored_input(store(), current(), data, ".json", meta)


def duration(seconds: float | None) -> str:
    """`~12 s`, `~3 min`, `~1.5 h`, or "unknown"."""
    if seconds is None:
        return "unknown"
    if seconds < 90:
        return f"~{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"~{round(seconds / 60)} min"
    return f"~{seconds / 3600:.1f} h"


def queue_line(job: Job) -> str:
    """ "Place 2 in the queue · starts in ~40 s · ends in ~3 min" for a queued job, the stage for a running one."""
    if job.state == "queued":
        return (f"Place {job.place} in the queue · starts in {duration(job.starts_in)} · "
                f"ends in {duration(job.ends_in)}")  # fmt: skip
    if job.state == "running":
        return f"{job.stage or 'starting'} · ends in {duration(job.ends_in)}"
    return STATE_WORDS.get(job.state, job.state)


def job_panel(key: str, title: str = "Job") -> Job | None:
    """The page's job under `key`: a live panel while it is queued or running; when it ended, its message (failed,
    cancelled, interrupted) and "Run again". Returns the job (the caller shows a done job's result)."""
    job = attached(key)
    if job is None:
        return None
    if not job.final:
        _live(key, title)
        return job
    if job.state in AGAIN:
        c1, c2 = st.columns([4, 1], vertical_alignment="center")
        c1.error(f"{title}: {STATE_WORDS[job.state].lower()} — {paths.public_text(job.error or '')}",
                 icon=":material/error:")  # fmt: skip
        if c2.button("Run again", key=f"{key}-again"):
            again = jobs().run_again(current(), job.id)
            if again is not None:
                attach(key, again.id)
            st.rerun()
    return job


@st.fragment(run_every=POLL_SECONDS)
def _live(key: str, title: str) -> None:
    """The running job's panel, redrawn once a second; a rerun of the page when it ends."""
    job = attached(key)
    if job is None or job.final:
        st.rerun()
        return
    c1, c2 = st.columns([4, 1], vertical_alignment="center")
    c1.progress(job.fraction, text=f"{title} · {STATE_WORDS[job.state]} · {queue_line(job)}")
    if c2.button("Cancel", key=f"{key}-cancel"):
        jobs().cancel(current(), job.id)
    if job.workers == 0:
        st.caption("No job worker is running on this server yet: the job starts when one does "
                   "(`python -m analysis worker`; `scripts/start.sh` starts one with the app).")  # fmt: skip
    if job.log:
        with st.expander("Log"):
            st.code("\n".join(job.log[-50:]), language=None)
