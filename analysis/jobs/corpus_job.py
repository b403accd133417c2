"""Job kind ``corpus-stats``: a corpus statistic (:data:`analysis.jobs.stats.STATS`) of a tokenizer over a user's
corpus, run by a job worker (:mod:`analysis.jobs.queue`) — the corpus panels of the Prune, Extend and SA-BPE
pages (``ui/corpus_jobs.py``).

Params (plain JSON, :func:`corpus_params`): the tokenizer as a one-entry library zip stored in the workspace,
the statistic and its options, the corpus as server files (shared corpora, or files the page confined to the
operator's roots; checked again here) and uploads stored in the workspace (artifacts, with their file names), the
local executor's worker count, and a fingerprint of the files (path, size, modification time) so that a changed
file makes a new job.

The worker counts as the command line's local executor does (:func:`analysis.jobs.run.start`: map and reduce in a
process group of their own, which Cancel stops at once), in a workdir of its own per workspace and computation
(``<cache>/corpus-jobs/<digest>-<workspace>``: an interrupted job's "Run again" resumes from its finished tasks;
done, failed or cancelled, it is removed). The reduced buckets, summed (:func:`analysis.jobs.job.merged_counts`),
are stored in the workspace as one counts file (``corpus-results/<hash>.npz``, columnar, never pickled); the job's
result names it with the statistic's options and totals, and :func:`corpus_result` turns it into the statistic's
result — the same object as the direct engine call (:func:`analysis.jobs.compute`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from analysis.core import paths
from analysis.errors import DataError
from analysis.texts.corpora import shared_corpora
from analysis.texts.shards import confine_inputs, resolve
from analysis.tokenizer.sources import load_library_zip
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .counts_io import write_counts
from .executors import ExecutorConfig
from .job import finalize_counts, merged_counts
from .queue import inputs_hash
from .run import job_manifest, start
from .stats import get_stat

#: The job kind's name.
KIND = "corpus-stats"
#: How often the job looks at its counting process (seconds).
POLL_SECONDS = 0.5
#: Where the result's counts file lies in the workspace.
RESULTS = "corpus-results"
_UNSAFE = re.compile(r"[^\w.+-]")


def corpus_params(
    tokenizers: str,
    stat: str,
    options: dict[str, Any],
    files: Sequence[str],
    uploads: Sequence[tuple[str, str]],
    workers: int,
    fingerprint: str,
) -> dict[str, Any]:
    """The ``corpus-stats`` job's params: `tokenizers` (a library zip artifact holding one tokenizer), the statistic
    and its options, server `files` and `uploads` ((artifact name, file name) pairs), the local executor's
    `workers` and the files' `fingerprint` (:func:`files_fingerprint`)."""
    return {"tokenizers": tokenizers, "stat": stat, "options": dict(options), "files": [str(f) for f in files],
            "uploads": [[str(a), str(n)] for a, n in uploads], "workers": int(workers),
            "fingerprint": fingerprint}  # fmt: skip


def files_fingerprint(files: Sequence[str], layout: str = "text") -> str:
    """A hash of the files the inputs resolve to (path, size, modification time): a changed file, a new one."""
    if not files:
        return ""
    rows = [f"{s.url}\t{s.size}\t{s.mtime}" for s in resolve(files, layout=layout)]
    return hashlib.sha256("\n".join(rows).encode("utf-8", "surrogatepass")).hexdigest()[:24]


def shown_inputs(params: dict[str, Any]) -> list[str]:
    """The corpus as the equivalent command names it: the server files, then each upload by its file name."""
    return [*params.get("files", []), *(name for _, name in params.get("uploads", []))]


def _allowed_files(files: list[str], layout: str) -> list[str]:
    """The params' server files, each a shared corpus file or inside the operator's roots (ServerPathError)."""
    shared = {str(p) for p in shared_corpora().values()}
    others = [f for f in files if f not in shared]
    if others:
        confine_inputs(others, layout=layout)
    return files


def _linked_uploads(uploads: list[list[str]], ctx: Any) -> list[str]:
    """The uploads as files named as the user named them (the name says the format and, for code, the language):
    a link per upload to its file in the workspace, under ``<cache>/corpus-jobs/uploads/`` (the same link for the
    same upload, so a rerun finds the same job)."""
    root = paths.cache_dir() / "corpus-jobs" / "uploads"
    out: list[str] = []
    for artifact, name in uploads:
        src = ctx.file_path("artifact", artifact)
        safe = _UNSAFE.sub("_", Path(name).name)[:120].lstrip(".") or "upload.txt"
        folder = root / hashlib.sha256(f"{src}\n{safe}".encode()).hexdigest()[:24]
        folder.mkdir(parents=True, exist_ok=True)
        link = folder / safe
        if not (link.is_symlink() and os.readlink(link) == str(src)):
            tmp = folder / f".{safe}.{os.getpid()}.tmp"
            tmp.unlink(missing_ok=True)
            os.symlink(src, tmp)
            os.replace(tmp, link)
        out.append(str(link))
    return out


def corpus_job(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Job kind ``corpus-stats``: count the corpus with the local executor, store the summed counts in the
    workspace; the result names them (``counts``) with the statistic, its options and the map's totals."""
    t0 = time.perf_counter()
    ctx.progress(0.0, "reading the tokenizer")
    toks = dict(load_library_zip(ctx.file_path("artifact", str(params["tokenizers"])).read_bytes()))
    if len(toks) != 1:
        raise DataError("a corpus job counts with one tokenizer")
    tok = next(iter(toks.values()))
    stat_name = str(params["stat"])
    stat = get_stat(stat_name)
    ctx.progress(0.0, "listing the corpus")
    inputs = _allowed_files([str(f) for f in params.get("files", [])], stat.layout)
    inputs += _linked_uploads(params.get("uploads", []), ctx)
    if not inputs:
        raise DataError("no corpus files given")
    workers = int(params.get("workers", 2))
    cfg = ExecutorConfig(kind="local", workers=workers)
    m = job_manifest(tok, stat_name, inputs, options=params.get("options") or {}, executor=cfg)
    cfg.workdir = str(paths.cache_dir() / "corpus-jobs" / f"{m.digest()}-{ctx.ws_key[:12]}")
    job = start(tok, stat_name, inputs, options=params.get("options") or {}, executor=cfg)
    try:
        while not job.done():
            frac, msg = job.progress()
            ctx.progress(0.95 * frac, msg)  # raises Cancelled after a cancel: the finally stops the counting
            time.sleep(POLL_SECONDS)
        job.wait()
        t1 = time.perf_counter()
        ctx.progress(0.95, "merging buckets")
        counts, totals = merged_counts(job.workdir)
        ctx.progress(0.98, "storing the result")
        name = f"{RESULTS}/{inputs_hash(KIND, params)[:24]}.npz"
        with TemporaryDirectory(prefix="result-", dir=job.workdir.root.parent) as tmp:
            out = Path(tmp) / "counts.npz"
            size = write_counts(out, list(counts), list(counts.values()))
            ctx.put_file("artifact", name, {"what": f"corpus job: {stat_name} counts", "job": KIND}, out)
        ctx.log(f"{len(counts):,} keys, {size:,} bytes stored")
    finally:
        job.cancel()  # (nothing to stop once it ended; an attached handle stops nothing)
        if not job.attached and job.done():
            shutil.rmtree(job.workdir.root, ignore_errors=True)
    return {"stat": stat_name, "tokenizer": tok.content_hash, "options": m.options, "counts": name, "totals": totals,
            "inputs": shown_inputs(params), "workers": workers, "shards": len(m.shards), "bytes": m.total_bytes,
            "tasks": m.tasks, "buckets": m.buckets, "units": int(totals.get("units", 0) or 0),
            "seconds": {"count": round(t1 - t0, 3), "total": round(time.perf_counter() - t0, 3)}}  # fmt: skip


def corpus_result(tok: LoadedTokenizer, result: dict[str, Any], path: Path) -> Any:
    """The statistic's result of a done ``corpus-stats`` job (its `result` document and the file its ``counts``
    names): what :func:`analysis.jobs.compute` returns for the same inputs. DataError when the job counted with
    another tokenizer."""
    if result.get("tokenizer") != tok.content_hash:
        raise DataError(f"this corpus job counted with another tokenizer than {tok.name}: count again")
    return finalize_counts(tok, str(result["stat"]), dict(result["options"]), path, dict(result["totals"]))
