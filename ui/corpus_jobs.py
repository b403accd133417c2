"""Corpus statistics counted by a job of the app's queue (kind ``corpus-stats``, :mod:`analysis.jobs.corpus_job`):
the inputs a page may name, and a panel that submits the job on its button, shows it through the shared job panel
(:func:`ui.jobs.job_panel`: state, place in the queue, stage, log tail, Cancel, Run again) and hands the statistic's
result to the page once the job is done — also after a reload or a restart, since the job's id is kept in the
workspace (``job:<key>``).

Inputs: a folder on the server and a file-name pattern when the operator allows server paths (the folder passes
:func:`analysis.core.paths.confine`; every file the pattern matches must lie inside the allowed roots), files of the
shared corpora, and uploads — stored in the workspace once by content (job inputs), read by the worker from there.
The same inputs (tokenizer, statistic, options, files with their sizes and times, uploads, workers) find the job
already there: it runs once.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import streamlit as st

from analysis import LoadedTokenizer
from analysis.core import paths
from analysis.errors import DataError
from analysis.jobs import confine_inputs
from analysis.jobs.corpus_job import KIND, corpus_params, corpus_result, files_fingerprint
from analysis.jobs.queue import canonical
from ui.caching import cache_resource
from ui.errors import try_step
from ui.job_inputs import stored_tokenizers
from ui.jobs import attached, job_panel, jobs, submit
from ui.pickers import server_path_input
from ui.workspace import current, store

#: A file-name pattern: no folder separators, no `..` (wildcards * ? [ ] allowed).
_PATTERN = re.compile(r"[\w.*?\[\]\-+]+")
#: The job panel's title.
TITLE = "Corpus job"


class JobIdent(NamedTuple):
    """What identifies a page's counted corpus (hashable: the pages key their caches by it)."""

    tokenizer: str
    stat: str
    #: the corpus as the equivalent command names it: server files, then uploads by their file names
    inputs: tuple[str, ...]
    job: str
    workers: int


@dataclass(frozen=True, eq=False)
class Counted:
    """A done corpus job: its identity and the statistic's result (what :func:`analysis.jobs.compute` returns)."""

    ident: JobIdent
    result: Any


def _confined_glob(folder: Path, pattern: str, layout: str) -> list[str]:
    """`folder/pattern` when the pattern is a plain file-name pattern, confined by
    :func:`analysis.jobs.confine_inputs` (every match inside the operator's roots)."""
    if not _PATTERN.fullmatch(pattern) or pattern in (".", ".."):
        raise paths.ServerPathError(f"refused pattern {pattern!r}: a file-name pattern such as *.jsonl.gz")
    return confine_inputs([str(folder / pattern) if folder.is_dir() else str(folder)], layout=layout)


def corpus_inputs(
    key: str, shared: dict[str, Path], *, layout: str = "text", default_pattern: str = "*"
) -> list[str]:
    """The server files a corpus job counts: a server folder + pattern (when allowed), else shared corpus files."""
    if paths.server_paths_enabled():
        c1, c2 = st.columns([3, 1])
        folder = server_path_input("Corpus folder (or file) on the server", f"{key}-folder", container=c1)
        pattern = c2.text_input("File pattern", default_pattern, key=f"{key}-pattern")
        if folder is not None:
            found = try_step(_confined_glob, folder, pattern.strip() or "*", layout)
            return found or []
    chosen = st.multiselect("Shared corpus files to count", list(shared), key=f"{key}-shared")
    return [str(shared[k]) for k in chosen]


def corpus_uploads(key: str, *, layout: str = "text") -> list[tuple[str, str]]:
    """Corpus files uploaded here, each stored in the workspace once (a job input): (artifact name, file name)."""
    what = ("code files (.jsonl, .jsonl.gz, one record per line with text, repo, language; the file name says "
            "the language: tcl.jsonl.gz)" if layout == "code" else
            "text files (.txt, .gz, .jsonl, .parquet, .zip; one text per line or record)")  # fmt: skip
    ups = st.file_uploader(f"Upload corpus {what}", accept_multiple_files=True, key=f"{key}-upload",
                           max_upload_size=paths.upload_widget_mb())  # fmt: skip
    if not ups or not current():
        return []
    done: dict[str, str] = st.session_state.setdefault(f"{key}-stored", {})
    out: list[tuple[str, str]] = []
    for up in ups:
        if up.file_id not in done:
            name = try_step(_store_upload, up.name, up.getvalue())
            if name is None:
                continue
            done[up.file_id] = name
        out.append((done[up.file_id], up.name))
    return out


def _store_upload(file_name: str, data: bytes) -> str:
    """The artifact name of an uploaded corpus file in this workspace (stored unless it is there)."""
    name = f"job-inputs/corpus-{hashlib.sha256(data).hexdigest()[:24]}"
    ws = current()
    if store().get(ws, "artifact", name) is None:
        store().put(ws, "artifact", name, {"what": "corpus upload", "file": Path(file_name).name[:200]}, data)
    return name


@cache_resource(show_spinner="Reading the counted corpus …", max_entries=4)
def _result(tok: LoadedTokenizer, path: str, doc: str, _result_doc: dict[str, Any]) -> Any:
    """The statistic's result of a done job: its counts file (named by its content) read once per tokenizer and
    job result (`doc`, its canonical JSON)."""
    return corpus_result(tok, _result_doc, Path(path))


def _counted(tok: LoadedTokenizer, doc: dict[str, Any]) -> Any:
    """The statistic's result of a done job of this workspace (DataError: its counts are gone)."""
    path = store().file_path(current(), "artifact", str(doc["counts"]))
    if path is None:
        raise DataError("the corpus job's counts are no longer in this workspace: count again")
    return _result(tok, str(path), canonical(doc), doc)


def _setting(params: dict[str, Any]) -> str:
    """The part of a job's params that is not the corpus: tokenizer, statistic, options."""
    return canonical({k: params.get(k) for k in ("tokenizers", "stat", "options")})


def background_job(
    key: str,
    tok: LoadedTokenizer,
    stat: str,
    files: list[str],
    uploads: list[tuple[str, str]],
    *,
    layout: str = "text",
    options: dict | None = None,
    workers: int = 2,
    label: str = "Count",
) -> Counted | None:
    """Submit (button) and show the page's corpus job; the counted result once the job is done and its inputs are
    the page's (after a reload, whose empty uploader names no files, a job of the same tokenizer, statistic and
    options is shown), else None (the page shows the panel and stops there)."""
    tokenizers = try_step(stored_tokenizers, {tok.name: tok}, "corpus job tokenizer") if current() else None
    if tokenizers is None:
        st.info("Corpus jobs need this browser's workspace (the workspace store is unavailable).")
        return None
    params = None
    if files or uploads:
        fingerprint = try_step(files_fingerprint, files, layout)
        if fingerprint is not None:
            params = corpus_params(tokenizers, stat, options or {}, files, uploads, workers, fingerprint)
    job = attached(key)
    if st.button(label, key=f"{key}-start", type="primary", disabled=params is None) and params is not None:
        if job is not None and not job.final and canonical(job.params) != canonical(params):
            jobs().cancel(current(), job.id)  # the page's earlier job counted something else: stop it
        n = len(files) + len(uploads)
        job = try_step(submit, key, KIND, params, label=f"{TITLE}: {stat} of {n} file(s) with {tok.name}")
    if job is None:
        st.caption("The counting runs in a job worker, not in this page: other pages and sessions stay responsive, "
                   "and its result comes back here, also after a reload.")  # fmt: skip
        return None
    setting = _setting({"tokenizers": tokenizers, "stat": stat, "options": options or {}})
    same = _setting(job.params) == setting and (params is None or canonical(job.params) == canonical(params))
    if not same and job.final:
        st.caption(f"Press **{label}** to count this corpus (the last corpus job counted other inputs).")
        return None
    job = job_panel(key, TITLE)
    if job is None:
        return None
    if not same:
        st.caption(f"The running job counts other inputs; press **{label}** to count these instead.")
        return None
    if job.state != "done" or not job.result:
        return None
    doc = job.result
    result = try_step(_counted, tok, doc)
    if result is None:
        return None
    ident = JobIdent(
        tok.content_hash, stat, tuple(doc.get("inputs", [])), job.id, int(doc.get("workers", workers))
    )
    st.caption(f"Counted by a job worker: {int(doc.get('shards', 0)):,} file(s), {int(doc.get('bytes', 0)):,} bytes "
               f"in {float(doc.get('seconds', {}).get('total', 0)):.1f} s.")  # fmt: skip
    return Counted(ident, result)


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
) -> Counted | None:
    """The corpus inputs, a worker count and the corpus job: the counted result once done, else None."""
    files = corpus_inputs(key, shared, layout=layout, default_pattern=default_pattern)
    uploads = corpus_uploads(key, layout=layout)
    cores = os.cpu_count() or 1
    workers = st.number_input(
        "Worker processes (local executor)", 1, max(cores, 2), min(2, cores), key=f"{key}-workers"
    )
    return background_job(key, tok, stat, files, uploads, layout=layout, options=options, workers=int(workers),
                          label=label)  # fmt: skip
