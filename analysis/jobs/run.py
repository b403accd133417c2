"""Running a corpus statistic: :func:`plan` (the shards), :func:`compute` (blocking, with progress, on any executor),
:func:`start` (a background process for the app: :class:`BackgroundJob`) and their result, :class:`CorpusRun`."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.core.progress import Progress, report, scaled
from analysis.errors import AnalysisError, DataError
from analysis.texts.shards import Shard, resolve
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .executors import (
    ExecutorConfig,
    RunInfo,
    default_workdir,
    run_workdir,
)
from .job import Manifest, Workdir, assign, finalize, merged_totals, record_error, run_inprocess
from .stats import (
    get_stat,
)


@dataclass
class CorpusRun:
    """The outcome of :func:`compute`: the statistic's result and how it was computed.

    `result` is None only for a Slurm job submitted with ``wait=False`` (rerun to collect it). `totals` are the
    map's additive totals (``units``: text units read, ``chars`` …; per group for compression).
    """

    result: Any
    stat: str
    executor: str
    shards: int
    bytes: int
    workdir: Path | None = None
    info: RunInfo | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    totals: dict = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """A JSON-serialisable description (without the result)."""
        out: dict[str, Any] = {
            "stat": self.stat,
            "executor": self.executor,
            "shards": self.shards,
            "bytes": self.bytes,
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }
        if "units" in self.totals:
            out["units"] = int(self.totals["units"])
        if self.workdir is not None:
            out["workdir"] = str(self.workdir)
        if self.info is not None:
            out["map_tasks_run"] = len(self.info.map_run)
            out["map_tasks_skipped"] = self.info.map_skipped
            out["reduce_tasks_run"] = len(self.info.reduce_run)
            out["submitted"] = self.info.submitted
        return out


def _shards_for(stat_name: str, inputs: Sequence[str], opts: dict) -> list[Shard]:
    stat = get_stat(stat_name)
    shards = resolve(inputs, layout=stat.layout, heldout=bool(opts.get("heldout")))
    langs = opts.get("languages")
    if stat.layout == "code" and langs:
        shards = [s for s in shards if s.group in set(langs)]
        if not shards:
            raise DataError("no code corpus files (*.jsonl or *.jsonl.gz) selected")
    return shards


def plan(
    tok: LoadedTokenizer,
    stat: str,
    inputs: Sequence[str],
    *,
    options: dict | None = None,
    executor: ExecutorConfig | None = None,
) -> tuple[Workdir, Manifest]:
    """Resolve the inputs and prepare the workdir of a datatrove job (resumed when it already holds this job)."""
    s = get_stat(stat)
    opts = s.options(tok, dict(options or {}))
    cfg = executor or ExecutorConfig()
    cfg.check()
    return _prepare(tok, stat, opts, _shards_for(stat, inputs, opts), cfg)


def _prepare(
    tok: LoadedTokenizer, stat: str, opts: dict, shards: list[Shard], cfg: ExecutorConfig
) -> tuple[Workdir, Manifest]:
    tasks = cfg.resolved_tasks(len(shards))
    buckets = cfg.resolved_buckets(sum(x.size for x in shards))
    m = Manifest(stat, opts, tok.content_hash, tok.name, shards, tasks, buckets)
    m.assignment = assign(shards, tasks)
    wd = Workdir(cfg.workdir or default_workdir(m.digest()))
    wd.prepare(m, tok, restart=cfg.restart)
    return wd, m


def compute(
    tok: LoadedTokenizer,
    stat: str,
    inputs: Sequence[str],
    *,
    options: dict | None = None,
    executor: ExecutorConfig | None = None,
    progress: Progress | None = None,
) -> CorpusRun:
    """Compute a corpus statistic (see :data:`STATS`) over files / folders / globs / ``hf://`` paths.

    `options` are the statistic's (e.g. ``{"n_new": 1000}`` for SentencePiece-mode words, ``{"group_by":
    "folder"}`` for compression). `executor` says where (default: `auto`). Progress is reported as 0..1.
    Raises DataError for unreadable or corrupt inputs (naming the shard) and for failed tasks.
    """
    t0 = time.perf_counter()
    s = get_stat(stat)
    opts = s.options(tok, dict(options or {}))
    cfg = executor or ExecutorConfig()
    cfg.check()
    shards = _shards_for(stat, inputs, opts)
    total = sum(x.size for x in shards)
    kind = cfg.resolved_kind(total)
    if kind == "inprocess":
        secs: dict = {}
        result, totals = run_inprocess(tok, s, opts, shards, progress, secs)
        report(progress, 1, 1, "done")
        secs["total"] = time.perf_counter() - t0
        return CorpusRun(result, stat, kind, len(shards), total, seconds=secs, totals=totals)
    wd, _ = _prepare(tok, stat, opts, shards, cfg)
    t1 = time.perf_counter()
    info = run_workdir(wd, cfg, kind, scaled(progress, 0.0, 0.97))
    if info.submitted and not cfg.wait:
        return CorpusRun(None, stat, kind, len(shards), total, wd.root, info)
    t2 = time.perf_counter()
    result = finalize(wd, scaled(progress, 0.97, 1.0))
    totals = merged_totals(wd, wd.manifest())
    t3 = time.perf_counter()
    secs = {"plan": t1 - t0, **info.seconds, "finalize": t3 - t2, "total": t3 - t0}
    return CorpusRun(result, stat, kind, len(shards), total, wd.root, info, secs, totals)


# --------------------------------------------------------------------------------------------------
# Background jobs (the app): a separate process, progress from the workdir, cancel = kill its group
# --------------------------------------------------------------------------------------------------
def _background_main(workdir: str, cfg: ExecutorConfig) -> None:
    os.setpgrp()  # the job and its worker processes form one group: cancel() stops them all
    wd = Workdir(workdir)
    try:
        run_workdir(wd, cfg, "local")
    except AnalysisError as e:
        if not wd.errors():  # a task's own failure is already there
            record_error(wd, "job", 0, e)
        os._exit(2)
    except BaseException as e:
        record_error(wd, "job", 0, e)
        os._exit(3)


class BackgroundJob:
    """A corpus job running in its own process group (the app's sessions stay responsive).

    ``progress()`` → (fraction 0..1, message) from the workdir's markers; ``done()``; ``result()`` finalizes
    (raises DataError if the job failed); ``cancel()`` stops the job — completed tasks are kept, so starting the
    same job again resumes it.
    """

    def __init__(self, wd: Workdir, m: Manifest, proc: multiprocessing.process.BaseProcess | None) -> None:
        self.workdir = wd
        self.manifest = m
        self._proc = proc
        self._result: Any = None
        self._finished = False

    def progress(self) -> tuple[float, str]:
        """(fraction done, message)."""
        done, total, n = self.workdir.map_progress(self.manifest)
        if n < self.manifest.tasks:
            f = 0.9 * (done / total if total else n / self.manifest.tasks)
            return f, f"counting: {n}/{self.manifest.tasks} tasks"
        red = len(self.workdir.completed("reduce"))
        return 0.9 + 0.1 * red / self.manifest.buckets, f"reducing: {red}/{self.manifest.buckets} buckets"

    @property
    def attached(self) -> bool:
        """True when this handle watches a job another process (session) started."""
        return self._proc is None

    def done(self) -> bool:
        """Whether the job has ended (successfully or not)."""
        if self._proc is None:
            return not self.workdir.running()
        return not self._proc.is_alive()

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the job and return the statistic's result (DataError with the task's message on failure)."""
        if self._finished:
            return self._result
        if self._proc is None:
            t0 = time.monotonic()
            while self.workdir.running():
                if timeout is not None and time.monotonic() - t0 > timeout:
                    raise DataError("the corpus job is still running")
                time.sleep(0.5)
        else:
            self._proc.join(timeout)
            if self._proc.is_alive():
                raise DataError("the corpus job is still running")
        errs = self.workdir.errors()
        if (self._proc is not None and self._proc.exitcode != 0) or errs:
            code = self._proc.exitcode if self._proc is not None else "?"
            raise DataError(errs[-1] if errs else f"the corpus job stopped (exit code {code})")
        self._result = finalize(self.workdir)
        self._finished = True
        return self._result

    def totals(self) -> dict:
        """The map's additive totals (``units`` read, ``chars`` …) of a finished job."""
        return merged_totals(self.workdir, self.manifest)

    def cancel(self) -> None:
        """Stop the job and its workers (completed tasks stay; the same job resumes from them).

        An attached handle (a job another session started) does not stop it.
        """
        if self._proc is None:
            return
        pid = self._proc.pid
        if pid is not None and self._proc.is_alive():
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(pid, sig)
                except ProcessLookupError:  # not yet its own group leader
                    self._proc.terminate() if sig == signal.SIGTERM else self._proc.kill()
                self._proc.join(5)
                if not self._proc.is_alive():
                    break


def start(
    tok: LoadedTokenizer,
    stat: str,
    inputs: Sequence[str],
    *,
    options: dict | None = None,
    executor: ExecutorConfig | None = None,
) -> BackgroundJob:
    """Start a corpus job on the local executor in a background process (for the app's pages).

    The job's workdir is prepared here (input errors raise at once); the counting runs in a new process group
    with `executor.workers` workers, started with ``spawn`` so that a multi-threaded server is never forked.
    If the same job (same workdir) is already running, e.g. started by another session, the returned handle
    watches it (``attached``) instead of starting it twice.
    """
    cfg = executor or ExecutorConfig(kind="local")
    if cfg.kind in ("auto", "inprocess"):
        cfg = ExecutorConfig(**{**cfg.__dict__, "kind": "local"})
    if cfg.kind != "local":
        raise DataError("background corpus jobs run on the local executor")
    wd, m = plan(tok, stat, inputs, options=options, executor=cfg)
    if wd.running():  # another session runs this very job: watch it instead of starting a second one
        return BackgroundJob(wd, m, None)
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_background_main, args=(str(wd.root), cfg), daemon=False)
    proc.start()
    return BackgroundJob(wd, m, proc)
