"""Where a corpus job runs: in this process, on local cores, on Slurm or on Ray (datatrove executors).

Why one file (about 600 lines): the four executors (in process, local, Slurm, Ray) and the one argument group
that chooses between them change together.

:class:`ExecutorConfig` holds the choice and its options; :func:`add_executor_arguments` /
:func:`executor_from_args` give every command the same ``--executor inprocess|local|slurm|ray --tasks N
--workers N --workdir DIR`` flags with the Slurm and Ray options passed through.

* ``inprocess`` — no datatrove, no workdir: the per-text functions over the whole corpus in this process.
* ``local`` — datatrove's ``LocalPipelineExecutor``: `tasks` map tasks on `workers` processes, then one
  reduce task per bucket.
* ``slurm`` — ``SlurmPipelineExecutor``: an sbatch array job for the map stage and a dependent one for the
  reduce; this process then waits (polling the completion markers, with progress) unless ``--no-wait``.
* ``ray`` — ``RayPipelineExecutor`` on the cluster at ``--ray-address`` (``ray`` is imported only here).
* ``auto`` (default) — ``inprocess`` below :data:`AUTO_LOCAL_BYTES` of input, else ``local`` on every core.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.core import paths
from analysis.core.inputs import real_number, whole_number
from analysis.core.progress import Cancelled, Progress
from analysis.errors import AnalysisError, DataError

from .job import CountStep, Manifest, ReduceStep, Workdir

#: Executors by name.
EXECUTORS = ("auto", "inprocess", "local", "slurm", "ray")
#: `auto` switches from in-process to the local executor at this much input (bytes on disk).
AUTO_LOCAL_BYTES = 256 * 1024 * 1024
#: Default hash buckets (= reduce tasks): one per this many input bytes, at least one per worker (and 16 on
#: clusters), at most :data:`MAX_BUCKETS`. Each bucket's reduce rebuilds the base model once, so a few big
#: buckets are faster on small corpora while many small ones bound the reduce memory on big ones.
BYTES_PER_BUCKET = 256 * 1024 * 1024
MAX_BUCKETS = 1024


@dataclass
class ExecutorConfig:
    """How and where to run a corpus job (see the module docstring); every field has a usable default."""

    kind: str = "auto"
    tasks: int | None = None
    workers: int | None = None
    workdir: str | None = None
    buckets: int | None = None
    restart: bool = False
    start_method: str = "fork"
    quiet: bool = True
    wait: bool = True
    poll_seconds: float = 10.0
    # Slurm
    partition: str | None = None
    time: str = "04:00:00"
    cpus_per_task: int = 1
    mem_per_cpu_gb: float = 2.0
    qos: str | None = None
    job_name: str = "toklab-corpus"
    sbatch_args: dict[str, str] = field(default_factory=dict)
    env_command: str | None = None
    # Ray
    ray_address: str | None = None

    def resolved_kind(self, total_bytes: int) -> str:
        """The executor `auto` stands for at this input size (other kinds unchanged)."""
        if self.kind != "auto":
            return self.kind
        return "local" if total_bytes >= AUTO_LOCAL_BYTES else "inprocess"

    def resolved_workers(self) -> int:
        """Worker processes for the local executor (default: every core)."""
        return max(1, int(self.workers or os.cpu_count() or 1))

    def resolved_tasks(self, n_shards: int) -> int:
        """Map tasks: as given, else 4 per worker (local) or one per shard (cluster), at most one per shard."""
        if self.tasks:
            return max(1, int(self.tasks))
        if self.resolved_kind(0) in ("slurm", "ray"):
            return max(1, n_shards)
        return max(1, min(n_shards, 4 * self.resolved_workers()))

    def resolved_buckets(self, total_bytes: int) -> int:
        """Hash buckets: as given, else one per BYTES_PER_BUCKET, at least one per worker (16 on clusters)."""
        if self.buckets:
            return int(self.buckets)
        floor = 16 if self.resolved_kind(total_bytes) in ("slurm", "ray") else self.resolved_workers()
        return max(floor, min(MAX_BUCKETS, -(-total_bytes // BYTES_PER_BUCKET)))

    def check(self) -> None:
        """Raise DataError for inconsistent options."""
        if self.kind not in EXECUTORS:
            raise DataError(f"unknown executor {self.kind!r}; choose one of {', '.join(EXECUTORS)}")
        if self.tasks is not None and self.tasks < 1:
            raise DataError("--tasks must be at least 1")
        if self.workers is not None and self.workers < 1:
            raise DataError("--workers must be at least 1")
        if self.buckets is not None and not 1 <= self.buckets <= MAX_BUCKETS:
            raise DataError(f"--buckets must be between 1 and {MAX_BUCKETS}")
        if self.kind == "slurm" and not self.partition:
            raise DataError("the slurm executor needs --partition")
        if self.cpus_per_task < 1:
            raise DataError("--cpus-per-task must be at least 1")


def default_workdir(digest: str) -> Path:
    """The workdir of a job when none is given: ``<cache>/corpus-jobs/<digest>`` (a rerun resumes it)."""
    return paths.cache_dir() / "corpus-jobs" / digest


# --------------------------------------------------------------------------------------------------
# Command-line arguments
# --------------------------------------------------------------------------------------------------
def _key_value(s: str) -> tuple[str, str]:
    k, sep, v = s.partition("=")
    if not k.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. account=myproj), got {s!r}")
    return k.strip().lstrip("-"), v.strip()


def add_executor_arguments(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Add the corpus-executor flags (one argument group) to a command's parser; returns the group."""
    g = parser.add_argument_group(
        "corpus executor",
        "where corpus statistics are computed (datatrove); see docs/corpus-jobs.md",
    )
    g.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="auto",
        help="inprocess, local (datatrove, this machine's cores), slurm or ray; auto (default): in process "
        f"below {AUTO_LOCAL_BYTES // 2**20} MB of input, else local",
    )
    g.add_argument(
        "--tasks", type=whole_number(1), default=None, metavar="N", help="map tasks (default: 4 per worker)"
    )
    g.add_argument(
        "--workers",
        type=whole_number(1),
        default=None,
        metavar="N",
        help="parallel local workers (default: cores)",
    )
    g.add_argument(
        "--workdir",
        default=None,
        metavar="DIR",
        help="job folder (partial counts, completion markers, logs); a rerun resumes it "
        "(default: a folder per job under the cache)",
    )
    g.add_argument(
        "--buckets",
        type=whole_number(1, MAX_BUCKETS),
        default=None,
        metavar="K",
        help="hash buckets = reduce tasks (default: one per 256 MB of input, at least one per worker)",
    )
    g.add_argument("--restart", action="store_true", help="discard the workdir's earlier job and start over")
    g.add_argument(
        "--start-method",
        choices=("fork", "forkserver", "spawn"),
        default="fork",
        help="how local workers start (default fork: fastest)",
    )
    g.add_argument("--verbose-tasks", action="store_true", help="show datatrove's task logs on stderr")
    g.add_argument("--partition", default=None, help="slurm: partition")
    g.add_argument("--time", default="04:00:00", help="slurm: time limit per task (default 04:00:00)")
    g.add_argument(
        "--cpus-per-task",
        type=whole_number(1),
        default=1,
        metavar="N",
        help="slurm/ray: CPUs per task (default 1)",
    )
    g.add_argument(
        "--mem-per-cpu-gb",
        type=real_number(0, open_low=True),
        default=2.0,
        metavar="GB",
        help="slurm/ray: memory per CPU (default 2)",
    )
    g.add_argument("--qos", default=None, help="slurm: quality of service")
    g.add_argument("--job-name", default="toklab-corpus", help="slurm: job name")
    g.add_argument(
        "--sbatch",
        action="append",
        default=[],
        type=_key_value,
        metavar="KEY=VALUE",
        help="slurm: extra #SBATCH directive (repeatable), e.g. --sbatch account=myproj",
    )
    g.add_argument(
        "--env-command",
        default=None,
        help="slurm: shell line run before each task (default: activate this venv, put the repository on PYTHONPATH)",
    )
    g.add_argument("--no-wait", action="store_true", help="slurm: submit and return (rerun later to collect)")
    g.add_argument("--ray-address", default=None, help="ray: cluster address (default: RAY_ADDRESS or local)")
    return g


def executor_from_args(args: argparse.Namespace) -> ExecutorConfig:
    """The ExecutorConfig that :func:`add_executor_arguments`'s flags describe (checked)."""
    cfg = ExecutorConfig(
        kind=args.executor,
        tasks=args.tasks,
        workers=args.workers,
        workdir=args.workdir,
        buckets=args.buckets,
        restart=args.restart,
        start_method=args.start_method,
        quiet=not args.verbose_tasks,
        wait=not args.no_wait,
        partition=args.partition,
        time=args.time,
        cpus_per_task=args.cpus_per_task,
        mem_per_cpu_gb=args.mem_per_cpu_gb,
        qos=args.qos,
        job_name=args.job_name,
        sbatch_args=dict(args.sbatch),
        env_command=args.env_command,
        ray_address=args.ray_address,
    )
    cfg.check()
    return cfg


# --------------------------------------------------------------------------------------------------
# Quiet datatrove tasks
# --------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _stderr_to_null(quiet: bool) -> Iterator[None]:
    """While running a task quietly, datatrove's console log sink (it binds sys.stderr) writes nowhere."""
    if not quiet:
        yield
        return
    saved = sys.stderr
    sys.stderr = io.StringIO() if saved is None else open(os.devnull, "w")  # noqa: SIM115
    try:
        yield
    finally:
        null, sys.stderr = sys.stderr, saved
        null.close()


def _cache_loguru_lib_dirs() -> None:
    """Make adding a loguru sink cheap: loguru looks up the Python library folders (36 ``sysconfig.get_path``
    calls, about 8 ms) for every sink it adds, and datatrove adds and removes sinks around every task (four adds
    per task, a third of a second per 16 tasks). The folders do not change while a job runs, so they are looked up
    once per process. Nothing happens if loguru's internals are not as expected."""
    try:
        from loguru import _better_exceptions as be  # noqa: PLC0415  (datatrove's logger, loaded with it)

        formatter = be.ExceptionFormatter
        if getattr(formatter, "_toklab_cached", False):
            return
        dirs = list(formatter._get_lib_dirs())
    except (ImportError, AttributeError, TypeError):
        return
    formatter._get_lib_dirs = staticmethod(lambda: list(dirs))
    formatter._toklab_cached = True


class _QuietRanks:
    """Mixin: datatrove's per-task logs go to the workdir's log files only (the console stays clean)."""

    quiet = True

    def _run_for_rank(self, rank: int, local_rank: int = 0, node_rank: int = -1):
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        _cache_loguru_lib_dirs()
        with _stderr_to_null(self.quiet):
            try:
                return super()._run_for_rank(rank, local_rank, node_rank)  # type: ignore[misc]
            finally:
                from loguru import logger  # noqa: PLC0415

                logger.remove()  # datatrove re-added its console sink on our null stream
                logger.add(sys.__stderr__ or sys.stderr, level="WARNING")


def _local_class():
    from datatrove.executor.local import LocalPipelineExecutor  # noqa: PLC0415

    class QuietLocalExecutor(_QuietRanks, LocalPipelineExecutor):
        """LocalPipelineExecutor whose task logs go to the workdir only."""

    return QuietLocalExecutor


def _slurm_class():
    from datatrove.executor.slurm import SlurmPipelineExecutor  # noqa: PLC0415

    return SlurmPipelineExecutor


# --------------------------------------------------------------------------------------------------
# Building the executors
# --------------------------------------------------------------------------------------------------
def map_pipeline(wd: Workdir) -> list:
    """The map stage's datatrove pipeline: one step that reads this task's shards and counts them."""
    return [CountStep(str(wd.root))]


def reduce_pipeline(wd: Workdir) -> list:
    """The reduce stage's pipeline: one task per bucket."""
    return [ReduceStep(str(wd.root))]


def local_executors(wd: Workdir, m: Manifest, cfg: ExecutorConfig) -> tuple[Any, Any]:
    """(map, reduce) LocalPipelineExecutors writing their markers and logs under the workdir."""
    cls = _local_class()
    workers = cfg.resolved_workers()
    mk = cls(
        map_pipeline(wd),
        tasks=m.tasks,
        workers=min(workers, m.tasks),
        logging_dir=str(wd.map_logs),
        start_method=cfg.start_method,
    )
    rd = cls(
        reduce_pipeline(wd),
        tasks=m.buckets,
        workers=min(workers, m.buckets),
        logging_dir=str(wd.reduce_logs),
        start_method=cfg.start_method,
    )
    mk.quiet = rd.quiet = cfg.quiet
    return mk, rd


def slurm_env_command(cfg: ExecutorConfig) -> str:
    """The shell lines each Slurm task runs first: the user's, else activate this venv + repository on PYTHONPATH."""
    if cfg.env_command:
        return cfg.env_command
    lines = []
    activate = Path(sys.prefix) / "bin" / "activate"
    if activate.is_file():
        lines.append(f"source {activate}")
    lines.append(f"export PYTHONPATH={paths.ROOT}${{PYTHONPATH:+:$PYTHONPATH}}")
    lines.append("export TOKENIZERS_PARALLELISM=false")
    return "\n".join(lines)


def slurm_executors(wd: Workdir, m: Manifest, cfg: ExecutorConfig) -> tuple[Any, Any]:
    """(map, reduce) SlurmPipelineExecutors: an array job of map tasks and a reduce job that depends on it."""
    cls = _slurm_class()
    gb = float(cfg.mem_per_cpu_gb)
    sbatch = dict(cfg.sbatch_args)
    if not gb.is_integer():  # sbatch wants whole units: 1.5 GB → 1536M
        sbatch.setdefault("mem-per-cpu", f"{round(gb * 1024)}M")
    common = {
        "time": cfg.time,
        "partition": cfg.partition,
        "cpus_per_task": cfg.cpus_per_task,
        "mem_per_cpu_gb": int(gb) if gb.is_integer() else gb,
        "qos": cfg.qos or "",
        "sbatch_args": sbatch,
        "env_command": slurm_env_command(cfg),
        "workers": cfg.workers or -1,
        "slurm_logs_folder": str(wd.root / "slurm_logs"),
    }
    mk = cls(
        map_pipeline(wd),
        tasks=m.tasks,
        job_name=f"{cfg.job_name}-map",
        logging_dir=str(wd.map_logs),
        **common,
    )
    rd = cls(
        reduce_pipeline(wd),
        tasks=m.buckets,
        job_name=f"{cfg.job_name}-reduce",
        logging_dir=str(wd.reduce_logs),
        depends=mk,
        **common,
    )
    return mk, rd


def slurm_script(executor: Any) -> str:
    """The sbatch script an un-launched SlurmPipelineExecutor would submit for its incomplete tasks."""
    n = len(executor.get_incomplete_ranks()) or 1
    jobs = -(-n // executor.tasks_per_job)
    max_array = min(jobs, executor.max_array_size) if executor.max_array_size != -1 else jobs
    run = f"launch_pickled_pipeline {executor.logging_dir.resolve_paths('executor.pik')}"
    if executor.with_srun:
        run = f"srun -l -n {executor.nodes_per_task} {run}"
    return executor.get_launch_file_contents(executor.get_sbatch_args(max_array), run)


def import_ray():
    """The `ray` module, or an AnalysisError saying how to get it (imported only for the ray executor)."""
    try:
        import ray  # noqa: PLC0415
    except ImportError:
        raise AnalysisError(
            "the ray executor needs the 'ray' package on this machine and the cluster "
            "(pip install 'ray[default]'); or use --executor local or slurm"
        ) from None
    return ray


def ray_executors(wd: Workdir, m: Manifest, cfg: ExecutorConfig) -> tuple[Any, Any]:
    """(map, reduce) RayPipelineExecutors (the caller has run ray.init)."""
    from datatrove.executor.ray import RayPipelineExecutor  # noqa: PLC0415

    common = {
        "cpus_per_task": cfg.cpus_per_task,
        "mem_per_cpu_gb": cfg.mem_per_cpu_gb,
        "workers": cfg.workers or -1,
    }
    mk = RayPipelineExecutor(map_pipeline(wd), tasks=m.tasks, logging_dir=str(wd.map_logs), **common)
    rd = RayPipelineExecutor(reduce_pipeline(wd), tasks=m.buckets, logging_dir=str(wd.reduce_logs), **common)
    return mk, rd


def ray_init(cfg: ExecutorConfig) -> Any:
    """Connect to the Ray cluster (`cfg.ray_address`, else RAY_ADDRESS / a local one); returns the module."""
    ray = import_ray()
    if not ray.is_initialized():
        kw: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": not cfg.quiet}
        if cfg.ray_address:
            kw["address"] = cfg.ray_address
        kw["runtime_env"] = {
            "env_vars": {"PYTHONPATH": str(paths.ROOT), "TOKENIZERS_PARALLELISM": "false"},
        }
        ray.init(**kw)
    return ray


# --------------------------------------------------------------------------------------------------
# Running a prepared workdir
# --------------------------------------------------------------------------------------------------
class _Poller:
    """A thread reporting map/reduce progress from the workdir's markers while an executor runs."""

    def __init__(self, wd: Workdir, m: Manifest, progress: Progress | None, every: float = 0.5) -> None:
        self.wd, self.m, self.progress, self.every = wd, m, progress, every
        self.cancelled: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def tick(self) -> None:
        """Report once (the map stage as 0–90 %, the reduce as 90–100 %)."""
        if self.progress is None:
            return
        done, total, n_done = self.wd.map_progress(self.m)
        red = len(self.wd.completed("reduce"))
        if n_done < self.m.tasks:
            frac = 0.9 * (done / total if total else n_done / self.m.tasks)
            msg = f"counting: {n_done}/{self.m.tasks} tasks, {done / 1e6:,.0f}/{total / 1e6:,.0f} MB"
        else:
            frac = 0.9 + 0.1 * red / self.m.buckets
            msg = f"reducing: {red}/{self.m.buckets} buckets"
        try:
            self.progress(frac, 1.0, msg)
        except Cancelled as e:
            self.cancelled = e
        except Exception:  # a broken callback must not kill the job
            pass

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.tick()

    def __enter__(self) -> _Poller:
        if self.progress is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.tick()


def _raise_task_error(wd: Workdir, e: BaseException | None = None) -> None:
    errs = wd.errors()
    if errs:
        raise DataError(errs[-1]) from None
    if isinstance(e, AnalysisError):
        raise e
    if e is not None:
        raise DataError(
            f"a corpus task failed: {type(e).__name__}: {e} (logs under {wd.root}/map/logs)"
        ) from e


@dataclass
class RunInfo:
    """What one run did: map tasks run / skipped, reduce tasks run, seconds per stage."""

    map_run: list[int] = field(default_factory=list)
    map_skipped: int = 0
    reduce_run: list[int] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    submitted: bool = False


def run_workdir(wd: Workdir, cfg: ExecutorConfig, kind: str, progress: Progress | None = None) -> RunInfo:
    """Run (or resume) the map and reduce stages of a prepared workdir on executor `kind`."""
    with wd.lock():
        return _run_locked(wd, cfg, kind, progress)


def _run_locked(wd: Workdir, cfg: ExecutorConfig, kind: str, progress: Progress | None) -> RunInfo:
    m = wd.manifest()
    info = RunInfo()
    todo_map = sorted(set(range(m.tasks)) - wd.completed("map"))
    info.map_run = todo_map
    info.map_skipped = m.tasks - len(todo_map)
    if todo_map:
        wd.clear_completions("reduce")  # the reduce depends on every map task
    info.reduce_run = sorted(set(range(m.buckets)) - wd.completed("reduce"))
    wd.clear_errors()
    if not todo_map and not info.reduce_run:
        return info
    t0 = time.perf_counter()
    with _quiet_logger(cfg.quiet):
        _run_stages(wd, m, cfg, kind, info, todo_map, progress)
    info.seconds.setdefault("total", time.perf_counter() - t0)
    return info


@contextlib.contextmanager
def _quiet_logger(quiet: bool) -> Iterator[None]:
    """datatrove's console log at WARNING while a quiet job runs in this process (restored afterwards)."""
    if not quiet:
        yield
        return
    import datatrove.utils.logging  # noqa: F401, PLC0415  (its import adds a console sink: let it happen first)
    from loguru import logger  # noqa: PLC0415

    logger.remove()
    sink = logger.add(sys.stderr, level="WARNING")
    try:
        yield
    finally:
        try:
            logger.remove(sink)
        except ValueError:
            logger.remove()
        logger.add(sys.stderr, level="INFO")


def _run_stages(
    wd: Workdir,
    m: Manifest,
    cfg: ExecutorConfig,
    kind: str,
    info: RunInfo,
    todo_map: list[int],
    progress: Progress | None,
) -> None:
    t0 = time.perf_counter()
    if kind == "local":
        _ = wd.tokenizer().dropout  # built and parsed once here; forked workers inherit it
        _cache_loguru_lib_dirs()  # once here, so forked workers inherit that too
        mk, rd = local_executors(wd, m, cfg)
        with _Poller(wd, m, progress) as poll:
            try:
                if todo_map:
                    mk.run()
                info.seconds["map"] = time.perf_counter() - t0
                if poll.cancelled:
                    raise poll.cancelled
                t1 = time.perf_counter()
                rd.run()
                info.seconds["reduce"] = time.perf_counter() - t1
            except Cancelled:
                raise
            except Exception as e:
                _raise_task_error(wd, e)
                raise
        if poll.cancelled:
            raise poll.cancelled
    elif kind == "ray":
        ray_init(cfg)
        mk, rd = ray_executors(wd, m, cfg)
        with _Poller(wd, m, progress):
            try:
                if todo_map:
                    mk.run()
                _check_stage(wd, "map", m.tasks)
                rd.run()
                _check_stage(wd, "reduce", m.buckets)
            except Exception as e:
                _raise_task_error(wd, e)
                raise
    elif kind == "slurm":
        mk, rd = slurm_executors(wd, m, cfg)
        rd.run()  # submits the map array job first (its dependency), then the reduce
        info.submitted = True
        if cfg.wait:
            wait_for(wd, m, progress, poll_seconds=cfg.poll_seconds)
    else:
        raise DataError(f"not a workdir executor: {kind}")


def _check_stage(wd: Workdir, stage: str, n: int) -> None:
    missing = sorted(set(range(n)) - wd.completed(stage))
    if missing:
        _raise_task_error(wd)
        raise DataError(f"{stage} tasks {missing[:8]} did not finish (logs under {wd.root}/{stage}/logs)")


def wait_for(
    wd: Workdir,
    m: Manifest,
    progress: Progress | None = None,
    *,
    poll_seconds: float = 10.0,
    timeout: float | None = None,
) -> None:
    """Block until every reduce task of a submitted job is complete (a failed task's error is raised)."""
    t0 = time.monotonic()
    poll = _Poller(wd, m, progress)
    while True:
        poll.tick()
        if poll.cancelled:
            raise poll.cancelled
        if len(wd.completed("reduce")) >= m.buckets:
            return
        if wd.errors():
            _raise_task_error(wd)
        if timeout is not None and time.monotonic() - t0 > timeout:
            raise DataError(f"the job in {wd.root} is still running; rerun the command later to collect it")
        time.sleep(poll_seconds)
