"""Running a corpus statistic: :func:`plan` (the shards), :func:`compute` (blocking, with progress, on any executor),
:func:`start` (a background process: :class:`BackgroundJob`, run by the app's ``corpus-stats`` job kind,
:mod:`analysis.jobs.corpus_job`) and their result, :class:`CorpusRun`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from analysis.core.progress import Progress, report, scaled
from analysis.errors import DataError
from analysis.texts.shards import Shard, resolve
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .executors import (
    ExecutorConfig,
    RunInfo,
    default_workdir,
    run_workdir,
)
from .job import Manifest, Workdir, assign, finalize, merged_totals, run_inprocess
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


def job_manifest(
    tok: LoadedTokenizer,
    stat: str,
    inputs: Sequence[str],
    *,
    options: dict | None = None,
    executor: ExecutorConfig | None = None,
) -> Manifest:
    """What a datatrove job of these inputs computes (shards, tasks, buckets; its :meth:`Manifest.digest` names
    it), without touching any workdir."""
    opts = get_stat(stat).options(tok, dict(options or {}))
    cfg = executor or ExecutorConfig()
    cfg.check()
    return _manifest(tok, stat, opts, _shards_for(stat, inputs, opts), cfg)


def _manifest(
    tok: LoadedTokenizer, stat: str, opts: dict, shards: list[Shard], cfg: ExecutorConfig
) -> Manifest:
    tasks = cfg.resolved_tasks(len(shards))
    buckets = cfg.resolved_buckets(sum(x.size for x in shards))
    m = Manifest(stat, opts, tok.content_hash, tok.name, shards, tasks, buckets)
    m.assignment = assign(shards, tasks)
    return m


def _prepare(
    tok: LoadedTokenizer, stat: str, opts: dict, shards: list[Shard], cfg: ExecutorConfig
) -> tuple[Workdir, Manifest]:
    m = _manifest(tok, stat, opts, shards, cfg)
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
# Background jobs (the app's corpus-stats job kind): a separate process, progress from the workdir, cancel = kill
# its process group
# --------------------------------------------------------------------------------------------------
#: Where the background process writes its own output (an import error, a crash) inside the workdir.
BACKGROUND_LOG = "background.log"


class BackgroundJob:
    """A corpus job running in its own process group (:mod:`analysis.jobs.background`).

    ``progress()`` → (fraction 0..1, message) from the workdir's markers; ``done()``; ``wait()`` (raises DataError
    if the job failed); ``result()`` waits and finalizes; ``cancel()`` stops the job — completed tasks are kept, so
    starting the same job again resumes it.
    """

    def __init__(self, wd: Workdir, m: Manifest, proc: subprocess.Popen | None) -> None:
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
        """True when this handle watches a job another process started."""
        return self._proc is None

    def done(self) -> bool:
        """Whether the job has ended (successfully or not)."""
        if self._proc is None:
            return not self.workdir.running()
        return self._proc.poll() is not None

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the job to end; DataError with the failed task's message (or "still running" after
        `timeout` seconds)."""
        if self._proc is None:
            t0 = time.monotonic()
            while self.workdir.running():
                if timeout is not None and time.monotonic() - t0 > timeout:
                    raise DataError("the corpus job is still running")
                time.sleep(0.5)
        else:
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                raise DataError("the corpus job is still running") from None
        errs = self.workdir.errors()
        code = self._proc.returncode if self._proc is not None else 0
        if code or errs:
            raise DataError(
                errs[-1] if errs else f"the corpus job stopped (exit code {code}){self._log_tail()}"
            )

    def _log_tail(self) -> str:
        try:
            tail = (self.workdir.root / BACKGROUND_LOG).read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return ""
        return f": {tail.splitlines()[-1]}" if tail else ""

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the job and return the statistic's result (DataError with the task's message on failure)."""
        if self._finished:
            return self._result
        self.wait(timeout)
        self._result = finalize(self.workdir)
        self._finished = True
        return self._result

    def totals(self) -> dict:
        """The map's additive totals (``units`` read, ``chars`` …) of a finished job."""
        return merged_totals(self.workdir, self.manifest)

    def cancel(self) -> None:
        """Stop the job and its workers (completed tasks stay; the same job resumes from them).

        An attached handle (a job another process started) does not stop it.
        """
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)  # the process leads its own group: its worker processes go too
            except ProcessLookupError:
                pass
            try:
                proc.wait(5)
                break
            except subprocess.TimeoutExpired:
                continue


def start(
    tok: LoadedTokenizer,
    stat: str,
    inputs: Sequence[str],
    *,
    options: dict | None = None,
    executor: ExecutorConfig | None = None,
) -> BackgroundJob:
    """Start a corpus job on the local executor in a background process (the ``corpus-stats`` job kind).

    The job's workdir is prepared here (input errors raise at once); the counting runs in a new Python process
    (:mod:`analysis.jobs.background`: never a fork of this process, which may hold threads) that leads its own
    process group with `executor.workers` workers, and stops when this process is gone. If the same job (same
    workdir) is already running, the returned handle watches it (``attached``) instead of starting it twice.
    """
    cfg = executor or ExecutorConfig(kind="local")
    if cfg.kind in ("auto", "inprocess"):
        cfg = ExecutorConfig(**{**cfg.__dict__, "kind": "local"})
    if cfg.kind != "local":
        raise DataError("background corpus jobs run on the local executor")
    wd, m = plan(tok, stat, inputs, options=options, executor=cfg)
    if wd.running():  # another process runs this very job: watch it instead of starting a second one
        return BackgroundJob(wd, m, None)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(_PROJECT), env.get("PYTHONPATH", "")) if x)
    args = [
        sys.executable,
        "-m",
        "analysis.jobs.background",
        str(wd.root),
        json.dumps(asdict(cfg)),
        str(os.getpid()),
    ]
    with open(wd.root / BACKGROUND_LOG, "wb") as log:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
    return BackgroundJob(wd, m, proc)


#: The folder that holds the `analysis` package (the background process imports it from there).
_PROJECT = Path(__file__).resolve().parents[2]
