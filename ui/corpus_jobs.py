"""Corpus statistics counted by a background job (:func:`analysis.jobs.start`, the local executor): the
inputs a page may name, and a panel that starts the job, shows its progress while the rest of the app stays
responsive (a fragment polls the job's workdir), offers Cancel, and hands the result to the page when done.

Inputs: a folder on the server and a file-name pattern when the operator allows server paths (the folder passes
:func:`analysis.core.paths.confine`; every file the pattern matches must lie inside the allowed roots), else files of
the shared corpora. Uploaded files stay in the page's in-process path (they are already in this process).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import streamlit as st

from analysis import LoadedTokenizer
from analysis.core import paths
from analysis.jobs import ExecutorConfig, confine_inputs, start
from ui.errors import try_step
from ui.pickers import server_path_input

#: A file-name pattern: no folder separators, no `..` (wildcards * ? [ ] allowed).
_PATTERN = re.compile(r"[\w.*?\[\]\-+]+")
#: How often the job panel polls the job (seconds).
POLL_SECONDS = 1.0


def _confined_glob(folder: Path, pattern: str, layout: str) -> list[str]:
    """`folder/pattern` when the pattern is a plain file-name pattern, confined by
    :func:`analysis.jobs.confine_inputs` (every match inside the operator's roots)."""
    if not _PATTERN.fullmatch(pattern) or pattern in (".", ".."):
        raise paths.ServerPathError(f"refused pattern {pattern!r}: a file-name pattern such as *.jsonl.gz")
    return confine_inputs([str(folder / pattern) if folder.is_dir() else str(folder)], layout=layout)


def corpus_inputs(
    key: str, shared: dict[str, Path], *, layout: str = "text", default_pattern: str = "*"
) -> list[str]:
    """The corpus a background job counts: a server folder + pattern (when allowed), else shared corpus files."""
    if paths.server_paths_enabled():
        c1, c2 = st.columns([3, 1])
        folder = server_path_input("Corpus folder (or file) on the server", f"{key}-folder", container=c1)
        pattern = c2.text_input("File pattern", default_pattern, key=f"{key}-pattern")
        if folder is not None:
            found = try_step(_confined_glob, folder, pattern.strip() or "*", layout)
            return found or []
    chosen = st.multiselect("Shared corpus files to count", list(shared), key=f"{key}-shared")
    return [str(shared[k]) for k in chosen]


def _job_id(key: str) -> str:
    return f"{key}-job"


def background_job(
    key: str,
    tok: LoadedTokenizer,
    stat: str,
    inputs: list[str],
    *,
    options: dict | None = None,
    workers: int = 2,
    label: str = "Count",
) -> Any | None:
    """Start (button) and watch a corpus job; the statistic's result once it finished, else None (the page
    shows the panel and stops there). The job and its result stay in this session until the inputs change."""
    ident = (tok.content_hash, stat, tuple(inputs), repr(sorted((options or {}).items())), int(workers))
    entry = st.session_state.get(_job_id(key))
    if entry is not None and entry["ident"] != ident:
        if entry.get("job") is not None and not entry["job"].done():
            entry["job"].cancel()
        st.session_state.pop(_job_id(key), None)
        entry = None
    if entry is not None and entry.get("result") is not None:
        return entry["result"]
    if entry is None:
        if not st.button(label, key=f"{key}-start", type="primary", disabled=not inputs):
            st.caption("The counting runs in its own processes: other pages and sessions stay responsive.")
            return None
        cfg = ExecutorConfig(kind="local", workers=int(workers))
        job = try_step(start, tok, stat, inputs, options=options, executor=cfg)
        if job is None:
            return None
        st.session_state[_job_id(key)] = {"ident": ident, "job": job, "result": None}
    _watch(key)
    entry = st.session_state.get(_job_id(key))
    return entry.get("result") if entry else None


@st.fragment(run_every=POLL_SECONDS)
def _watch(key: str) -> None:
    """Progress of the running job, a Cancel button; when it ends, its result (or error) and a full rerun."""
    entry = st.session_state.get(_job_id(key))
    if entry is None or entry.get("result") is not None:
        return
    job = entry["job"]
    if job.done():
        entry["result"] = try_step(job.result)  # a failed job shows its error (naming the shard)
        if entry["result"] is None:
            st.session_state.pop(_job_id(key), None)
            return
        st.rerun()
    frac, msg = job.progress()
    c1, c2 = st.columns([4, 1], vertical_alignment="center")
    where = f" · workdir {job.workdir.root}" if paths.server_paths_enabled() else ""
    c1.progress(min(max(frac, 0.0), 1.0), text=msg + where)
    if job.attached:
        c2.caption("Started by another session: watching it.")
    elif c2.button("Cancel", key=f"{key}-cancel"):
        job.cancel()
        st.session_state.pop(_job_id(key), None)
        st.rerun()


def corpus_panel(
    key: str,
    tok: LoadedTokenizer,
    stat: str,
    shared: dict[str, Path],
    *,
    layout: str = "text",
    options: dict | None = None,
    default_pattern: str = "*",
    label: str = "Count the corpus",
) -> Any | None:
    """The corpus inputs, a worker count and the background job: the statistic's result once counted, else None."""
    inputs = corpus_inputs(key, shared, layout=layout, default_pattern=default_pattern)
    cores = os.cpu_count() or 1
    workers = st.number_input(
        "Worker processes (local executor)", 1, max(cores, 2), min(2, cores), key=f"{key}-workers"
    )
    return background_job(key, tok, stat, inputs, options=options, workers=int(workers), label=label)
