"""One corpus job: its workdir, the map and reduce pipeline steps, and the final merge.

Why one file (about 600 lines): the workdir layout, the map and reduce steps and the final merge are the one
contract between this process and datatrove's workers; they change together.

Workdir layout (everything a job needs travels in it, so Slurm and Ray workers only need the shared path)::

    WORKDIR/
      .toklab-corpus-job             the marker: the job machinery made this folder (only such a folder is ever
                                     cleared by --restart; any other is refused, nothing deleted)
      manifest.json                  the job: statistic, options, tokenizer hash, shards, tasks, buckets,
                                     shards of each task
      tokenizer.json                 the tokenizer the tasks load
      map/                           datatrove logging folder of the map stage:
        completions/00000 …          one empty marker per finished task (datatrove's; a rerun skips these)
        logs/task_00000.log …        per-task logs;  stats/00000.json: datatrove's per-task stats
      reduce/                        the same for the reduce stage (task k reduces bucket k)
      parts/b0003/t00001-p000.npz    map task 1's counts of the keys in bucket 3 (p: spill part; columnar,
                                     never pickled: :mod:`.counts_io`)
      parts/totals/t00001.json       map task 1's additive totals (units, characters, …)
      reduced/b0003.npz              bucket 3 summed (for training: segmented, as vocabulary ids) + .meta.json
      progress/t00001.json           bytes a running map task has read (progress bars)
      errors/map-00001.txt           the message of a failed task

Every file is written atomically (temporary sibling + rename), so a killed task leaves either nothing or a
complete file; a task's completion marker is written only after all its files. A rerun skips completed map
tasks; if any map task had to run, every reduce marker is removed first (the reduce depends on all of them),
otherwise the reduce is resumed too.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import heapq
import json
import os
import shutil
import time
import weakref
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
from datatrove.pipeline.base import PipelineStep

from analysis.core import paths
from analysis.core.cache import memoize
from analysis.core.memory import no_cyclic_gc
from analysis.core.outputs import atomic_write_text
from analysis.core.progress import Progress, report
from analysis.errors import AnalysisError, DataError
from analysis.texts.shards import Position, Shard, iter_records, iter_units
from analysis.texts.stat import Doc, Stat, merge_globals
from analysis.tokenizer.tokenizer import LoadedTokenizer

from .counts_io import SUFFIX, read_counts, write_counts
from .stats import get_stat

MANIFEST = "manifest.json"
#: The file the job machinery writes into every workdir it creates: only such a folder may be cleared.
WORKDIR_MARKER = ".toklab-corpus-job"
MARKER_TEXT = "A corpus-job workdir made by Tokenizer Lab: --restart may delete everything in this folder.\n"
FORMAT = 1


# --------------------------------------------------------------------------------------------------
# The job description
# --------------------------------------------------------------------------------------------------
def assign(shards: Sequence[Shard], tasks: int) -> list[list[int]]:
    """Shard indices per task: largest shard first to the least-loaded task (balanced bytes), sorted per task."""
    heap = [(0, t) for t in range(tasks)]  # (bytes so far, task): the least-loaded task, lowest index on ties
    out: list[list[int]] = [[] for _ in range(tasks)]
    for i in sorted(range(len(shards)), key=lambda i: (-shards[i].size, i)):
        load, t = heapq.heappop(heap)
        out[t].append(i)
        heapq.heappush(heap, (load + max(1, shards[i].size), t))
    return [sorted(x) for x in out]


@dataclass
class Manifest:
    """What a workdir computes: statistic + options, tokenizer, shards, tasks, buckets and the task → shards map."""

    stat: str
    options: dict
    tokenizer_hash: str
    tokenizer_name: str
    shards: list[Shard]
    tasks: int
    buckets: int
    assignment: list[list[int]] = field(default_factory=list)

    def digest(self) -> str:
        """Identity of the computation (a workdir holds exactly one)."""
        body = {
            "format": FORMAT,
            "stat": self.stat,
            "options": self.options,
            "tokenizer": self.tokenizer_hash,
            "shards": [[s.url, s.size, s.mtime, s.group, s.input] for s in self.shards],
            "tasks": self.tasks,
            "buckets": self.buckets,
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]

    def to_json(self) -> dict:
        """The manifest file's content."""
        return {
            "format": FORMAT,
            "digest": self.digest(),
            "stat": self.stat,
            "options": self.options,
            "tokenizer": {"hash": self.tokenizer_hash, "name": self.tokenizer_name},
            "tasks": self.tasks,
            "buckets": self.buckets,
            "shards": [s.to_json() for s in self.shards],
            "assignment": self.assignment,
        }

    @classmethod
    def from_json(cls, d: dict) -> Manifest:
        """Read a manifest file's content."""
        return cls(
            stat=d["stat"],
            options=d["options"],
            tokenizer_hash=d["tokenizer"]["hash"],
            tokenizer_name=d["tokenizer"]["name"],
            shards=[Shard.from_json(s) for s in d["shards"]],
            tasks=int(d["tasks"]),
            buckets=int(d["buckets"]),
            assignment=[list(a) for a in d["assignment"]],
        )

    @property
    def total_bytes(self) -> int:
        """Bytes of all shards."""
        return sum(s.size for s in self.shards)

    def task_bytes(self, rank: int) -> int:
        """Bytes of the shards of one map task."""
        return sum(self.shards[i].size for i in self.assignment[rank])


def _docs(
    stat: Stat, opts: dict, shards: Sequence[Shard], indices: Sequence[int], pos: Position
) -> Iterator[Doc]:
    """The documents of some shards, in order, with group labels for the statistic."""
    group_by = opts.get("group_by", "file")
    for i in indices:
        s = shards[i]
        if stat.layout == "code":
            for r in iter_records(
                s,
                max_files_per_repo=opts.get("max_files_per_repo"),
                max_bytes_per_repo=opts.get("max_bytes_per_repo"),
                pos=pos,
            ):
                yield Doc(r.text, s.group, r.repo, r.language, r.path, i)
        else:
            if group_by == "file":
                g = s.group
            elif group_by == "folder":
                g = s.url.rstrip("/").rsplit("/", 2)[-2] if "/" in s.url else s.group
            elif group_by == "input":
                g = s.input
            else:
                g = "all"
            for u in iter_units(s, pos):
                yield Doc(u, g, shard=i)


# --------------------------------------------------------------------------------------------------
# Workdir files
# --------------------------------------------------------------------------------------------------
class Workdir:
    """The files of one job in a folder (see the module docstring for the layout)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root).expanduser().resolve()

    def __repr__(self) -> str:
        return f"Workdir({str(self.root)!r})"

    # paths
    @property
    def map_logs(self) -> Path:
        """datatrove's logging folder of the map stage."""
        return self.root / "map"

    @property
    def reduce_logs(self) -> Path:
        """datatrove's logging folder of the reduce stage."""
        return self.root / "reduce"

    def part(self, bucket: int, rank: int, n: int) -> Path:
        """Map task `rank`'s spill part `n` of bucket `bucket`."""
        return self.root / "parts" / f"b{bucket:04d}" / f"t{rank:05d}-p{n:03d}{SUFFIX}"

    def totals(self, rank: int) -> Path:
        """Map task `rank`'s additive totals."""
        return (
            self.root / "parts" / "totals" / f"t{rank:05d}.json"
        )  # + tNNNNN.meta.json: CPU and wall seconds

    def reduced(self, bucket: int) -> Path:
        """The reduced bucket."""
        return self.root / "reduced" / f"b{bucket:04d}{SUFFIX}"

    def error(self, stage: str, rank: int) -> Path:
        """Where a failed task leaves its message."""
        return self.root / "errors" / f"{stage}-{rank:05d}.txt"

    def progress_file(self, rank: int) -> Path:
        """Bytes read so far by a running map task."""
        return self.root / "progress" / f"t{rank:05d}.json"

    # manifest + tokenizer
    def manifest(self) -> Manifest:
        """The job this workdir holds."""
        p = self.root / MANIFEST
        try:
            return Manifest.from_json(json.loads(p.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise DataError(f"{self.root} is not a corpus-job workdir (no {MANIFEST})") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise DataError(f"{p}: unreadable manifest ({e}); rerun with --restart") from e

    def tokenizer(self) -> LoadedTokenizer:
        """The job's tokenizer: the object :meth:`prepare` was given, while this process (or its forked workers)
        still holds it, else loaded from the workdir once per process."""
        seeded = _PREPARED.get(str(self.root))
        return seeded if seeded is not None else _job_tokenizer(str(self.root))

    def prepare(self, manifest: Manifest, tok: LoadedTokenizer, *, restart: bool = False) -> bool:
        """Create (or check) the workdir for `manifest`; True when it already held this job (a resumed run).

        A workdir holding another job is refused unless `restart` (then its files are removed first).
        """
        p = self.root / MANIFEST
        if restart and self.running():
            raise DataError(f"the corpus job in {self.root} is running; it cannot be restarted now")
        if p.is_file():
            try:
                old = json.loads(p.read_text(encoding="utf-8")).get("digest")
            except (OSError, ValueError, AttributeError):  # unreadable, or JSON that is not an object
                old = None
            if old == manifest.digest() and not restart:
                _PREPARED[str(self.root)] = tok
                return True
            if not restart:
                raise DataError(
                    f"{self.root} holds another corpus job (other inputs, tokenizer, options, tasks or "
                    "buckets); choose another --workdir or pass --restart to discard it"
                )
        if restart and self.root.is_dir():
            self.clear()
        elif self.root.is_dir() and any(self.root.iterdir()) and not p.is_file():
            raise DataError(
                f"{self.root} is not empty and is not a corpus-job workdir; choose another --workdir"
            )
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.root / WORKDIR_MARKER, MARKER_TEXT)
        atomic_write_text(self.root / "tokenizer.json", tok.to_json())
        atomic_write_text(p, json.dumps(manifest.to_json(), ensure_ascii=False, indent=1))
        _PREPARED[str(self.root)] = tok
        return False

    def made_here(self) -> bool:
        """Whether the job machinery made this folder (its marker file is there), or it is empty."""
        try:
            if (self.root / WORKDIR_MARKER).is_file() or not any(self.root.iterdir()):
                return True
            # the default workdirs (named by their job's digest) were made here before the marker existed
            return self.root.resolve().parent == (paths.cache_dir() / "corpus-jobs").resolve()
        except OSError:
            return False

    def clear(self) -> None:
        """Remove every file of the job (the folder itself stays) — only in a folder the job machinery made
        (:data:`WORKDIR_MARKER`); any other folder is refused with nothing deleted."""
        if not self.made_here():
            raise DataError(
                f"{self.root} was not made by a corpus job (it has no {WORKDIR_MARKER} marker file): --restart only "
                "clears a workdir the job machinery created; nothing was deleted. Choose another --workdir "
                "(a new or empty folder)"
            )
        for child in self.root.iterdir():
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the workdir's lock while running its job (DataError if another process holds it)."""

        self.root.mkdir(parents=True, exist_ok=True)
        fh = open(self.root / ".lock", "a+")  # noqa: SIM115
        try:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.seek(0)
                who = fh.read().strip() or "another process"
                raise DataError(
                    f"the corpus job in {self.root} is already running ({who}); wait for it, or use another workdir"
                ) from None
            fh.seek(0)
            fh.truncate()
            fh.write(f"pid {os.getpid()}")
            fh.flush()
            yield
        finally:
            fh.close()

    def running(self) -> bool:
        """Whether a process holds the workdir's lock (a job is running in it)."""

        p = self.root / ".lock"
        if not p.is_file():
            return False
        with open(p, "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(fh, fcntl.LOCK_UN)
        return False

    # completion
    def completed(self, stage: str) -> set[int]:
        """Ranks with a datatrove completion marker in a stage (`map` or `reduce`)."""
        d = self.root / stage / "completions"
        if not d.is_dir():
            return set()
        return {int(p.name) for p in d.iterdir() if p.name.isdigit()}

    def clear_completions(self, stage: str) -> None:
        """Remove a stage's completion markers (its tasks run again)."""
        shutil.rmtree(self.root / stage / "completions", ignore_errors=True)

    def errors(self) -> list[str]:
        """Messages of failed tasks (oldest first)."""
        d = self.root / "errors"
        if not d.is_dir():
            return []
        files = sorted(d.glob("*.txt"), key=lambda p: p.stat().st_mtime)
        return [f.read_text(encoding="utf-8", errors="replace").strip() for f in files]

    def clear_errors(self) -> None:
        """Forget the messages of earlier failures."""
        shutil.rmtree(self.root / "errors", ignore_errors=True)

    def map_progress(self, m: Manifest) -> tuple[int, int, int]:
        """(bytes done, total bytes, completed map tasks): completed tasks count whole, running ones as read."""
        done_tasks = self.completed("map")
        done = sum(m.task_bytes(r) for r in done_tasks if r < m.tasks)
        d = self.root / "progress"
        if d.is_dir():
            for p in d.glob("t*.json"):
                try:
                    r = int(p.stem[1:])
                    if r not in done_tasks and r < m.tasks:
                        done += min(int(json.loads(p.read_text())["bytes"]), m.task_bytes(r))
                # progress is a courtesy: an unreadable or foreign file is skipped
                except (OSError, ValueError, KeyError, TypeError):
                    continue
        return done, m.total_bytes, len(done_tasks)


#: workdir → the tokenizer its job was prepared with in this process (the job's tokenizer.json holds the same
#: content), so that a job run here or in forked workers does not parse and build it again; weak: never kept alive
_PREPARED: weakref.WeakValueDictionary[str, LoadedTokenizer] = weakref.WeakValueDictionary()


@memoize(maxsize=1)
def _vocab_strings(tok: LoadedTokenizer) -> dict[str, str]:
    """The vocabulary's own string objects, by value (segmented words read back share them, as in process)."""
    return {s: s for s in tok.vocab}


@memoize(maxsize=1)
def _job_tokenizer(root: str) -> LoadedTokenizer:
    """The tokenizer of the job in `root`, checked against its manifest (loaded once per process)."""
    m = Workdir(root).manifest()
    raw = (Path(root) / "tokenizer.json").read_bytes()
    tok = LoadedTokenizer.from_json_text(raw, name=m.tokenizer_name, source=root)
    if tok.content_hash != m.tokenizer_hash:
        raise DataError(f"{root}/tokenizer.json does not match the manifest; rerun with --restart")
    return tok


# --------------------------------------------------------------------------------------------------
# datatrove pipeline steps
# --------------------------------------------------------------------------------------------------
def _task_docs(wd: Workdir, m: Manifest, stat: Stat, rank: int, step: PipelineStep, every: float = 1.0):
    """The documents of map task `rank`'s shards, read in this process as the in-process path reads them (no
    datatrove Document in between); bytes read go to ``progress/tNNNNN.json`` every `every` seconds."""
    pos = Position()
    done_before, current, n = 0, -1, 0
    last = time.monotonic()
    for n, d in enumerate(_docs(stat, m.options, m.shards, m.assignment[rank], pos), 1):
        if d.shard != current:
            if current >= 0:
                done_before += m.shards[current].size
            current = d.shard
            step.stat_update("shards")
        if not n % 256:
            now = time.monotonic()
            if now - last >= every:
                last = now
                _write_progress(wd, rank, done_before + pos.bytes_read())
        yield d
    step.stat_update("units", value=n, unit="task")


def _write_progress(wd: Workdir, rank: int, done: int) -> None:
    p = wd.progress_file(rank)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(p, json.dumps({"bytes": done}))
    except OSError:  # progress is a courtesy: never fail a task over it
        pass


class CountStep(PipelineStep):
    """Map stage: read this task's shards and run the statistic's map over them (the in-process path's code) →
    K bucket files."""

    name = "count"
    type = "🔢 - STATS"

    def __init__(self, workdir: str) -> None:
        super().__init__()
        self.workdir = str(workdir)

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        """Count, write parts/bNNNN/tRANK-pP.npz for every bucket and parts/totals/tRANK.json (a generator)."""
        wd = Workdir(self.workdir)
        try:
            m = wd.manifest()
            stat = get_stat(m.stat)
            tok = wd.tokenizer()
            for old in (wd.root / "parts").glob(f"b*/t{rank:05d}-p*{SUFFIX}"):  # an earlier attempt's
                old.unlink()
            wd.totals(rank).unlink(missing_ok=True)
            spills = [0]
            emit_seconds = [0.0]

            def emit(counter: Counter) -> None:
                t = time.perf_counter()
                with no_cyclic_gc():
                    for b, keys, counts in split_buckets(stat, counter, m.buckets):
                        write_counts(wd.part(b, rank, spills[0]), keys, counts)
                spills[0] += 1
                emit_seconds[0] += time.perf_counter() - t
                self.stat_update("keys_written", value=len(counter))

            cpu0, wall0 = time.process_time(), time.perf_counter()
            totals = stat.map(tok, _task_docs(wd, m, stat, rank, self), m.options, emit)
            totals_path = wd.totals(rank)
            totals_path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(totals_path, json.dumps(totals, ensure_ascii=False))
            timing = {
                "cpu_seconds": time.process_time() - cpu0,
                "seconds": time.perf_counter() - wall0,
                "emit_seconds": emit_seconds[0],  # splitting into buckets and writing them
            }
            atomic_write_text(
                totals_path.with_suffix(".meta.json"), json.dumps({**timing, "spills": spills[0]})
            )
        except BaseException as e:
            record_error(wd, "map", rank, e)
            raise
        finally:
            wd.progress_file(rank).unlink(missing_ok=True)
        return
        yield  # a generator, as datatrove pipelines expect


def split_buckets(stat: Stat, counter: Counter, k: int) -> Iterator[tuple[int, list, list[int]]]:
    """(bucket, keys, counts) for every non-empty bucket of a counter: one bucket without hashing when k == 1,
    else the keys grouped by `stat.buckets` with one stable sort (keys in the counter's order within a bucket)."""
    keys, counts = list(counter), list(counter.values())
    if k == 1 or not keys:
        if keys:
            yield 0, keys, counts
        return
    of = stat.buckets(keys, k)
    order = np.argsort(of, kind="stable")
    bounds = np.searchsorted(of[order], np.arange(k + 1)).tolist()
    picked = order.tolist()
    keys_in_order = itemgetter(*picked)(keys) if len(picked) > 1 else (keys[0],)  # one C call
    counts_in_order = np.asarray(counts, dtype=np.int64)[order].tolist()
    for b in range(k):
        lo, hi = bounds[b], bounds[b + 1]
        if hi > lo:
            yield b, list(keys_in_order[lo:hi]), counts_in_order[lo:hi]


class ReduceStep(PipelineStep):
    """Reduce stage: task k sums bucket k over every map task (+ the statistic's reduce, e.g. segmentation)."""

    name = "reduce"
    type = "🔢 - STATS"

    def __init__(self, workdir: str) -> None:
        super().__init__()
        self.workdir = str(workdir)

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        """Sum parts/bRANK/*.npz into reduced/bRANK.npz (a generator)."""
        wd = Workdir(self.workdir)
        try:
            with no_cyclic_gc():
                reduce_bucket(wd, rank)
        except BaseException as e:
            record_error(wd, "reduce", rank, e)
            raise
        return
        yield


def merged_totals(wd: Workdir, m: Manifest) -> dict:
    """The additive totals of every map task, merged (every map task must be complete)."""
    out: dict = {}
    for r in range(m.tasks):
        p = wd.totals(r)
        try:
            out = merge_globals(out, json.loads(p.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise DataError(f"{wd.root}: map task {r} has no totals; rerun the job to redo it") from None
        # (TypeError, AttributeError: JSON that is not an object of additive totals)
        except (OSError, ValueError, TypeError, AttributeError) as e:
            raise DataError(f"{p}: unreadable totals ({e}); rerun with --restart") from e
    return out


def reduce_bucket(wd: Workdir, bucket: int) -> dict:
    """Sum one bucket over all map tasks, post-process it, write reduced/bNNNN.npz; returns its meta data (with
    the seconds spent reading the parts, in the statistic's reduce and writing)."""
    t0 = time.perf_counter()
    m = wd.manifest()
    stat = get_stat(m.stat)
    tok = wd.tokenizer()
    totals = merged_totals(wd, m)
    counts: Counter = Counter()
    files = sorted((wd.root / "parts" / f"b{bucket:04d}").glob(f"t*-p*{SUFFIX}"))
    read = 0
    t1 = time.perf_counter()
    for f in files:
        read += f.stat().st_size
        read_counts(f, counts)
    keys_in = len(counts)
    t2 = time.perf_counter()
    out = stat.reduce(tok, counts, totals, m.options)
    t3 = time.perf_counter()
    written = write_counts(wd.reduced(bucket), list(out), list(out.values()))
    t4 = time.perf_counter()
    meta = {
        "bucket": bucket,
        "files": len(files),
        "bytes_read": read,
        "keys_in": keys_in,
        "keys_out": len(out),
        "bytes_written": written,
        "read_seconds": t2 - t1,
        "reduce_seconds": t3 - t2,
        "write_seconds": t4 - t3,
        "seconds": t4 - t0,
    }
    atomic_write_text(wd.reduced(bucket).with_suffix(".meta.json"), json.dumps(meta))
    return meta


def record_error(wd: Workdir, stage: str, rank: int, e: BaseException) -> None:
    """Leave a failed task's (or job's) message under errors/ for the process that waits on it."""
    msg = str(e) if isinstance(e, AnalysisError) else f"{type(e).__name__}: {e}"
    try:
        p = wd.error(stage, rank)
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(p, f"{stage} task {rank}: {msg}")
    except OSError:
        pass


def check_not_empty(totals: dict, n_shards: int) -> None:
    """DataError "the text is empty" when the map read no text unit (every line blank, or no file had any)."""
    empty = (
        ("units" in totals and not totals["units"])
        or ("groups" in totals and not totals["groups"])
        or ("records" in totals and not totals["records"])
    )
    if empty:
        raise DataError(
            f"the text is empty: the corpus ({n_shards} input file(s)) holds no non-blank line or record to count"
        )


def finalize(wd: Workdir, progress: Progress | None = None) -> Any:
    """Sum the reduced buckets and hand them to the statistic's finalize (every reduce task must be complete)."""
    m = wd.manifest()
    missing = sorted(set(range(m.buckets)) - wd.completed("reduce"))
    if missing:
        raise DataError(f"{wd.root}: reduce of bucket(s) {missing[:8]} not finished; rerun the job")
    stat = get_stat(m.stat)
    tok = wd.tokenizer()
    totals = merged_totals(wd, m)
    check_not_empty(totals, len(m.shards))
    counts: Counter = Counter()
    symbols = stat.symbols(tok, m.options)
    own = _vocab_strings(tok) if symbols is None else None
    with no_cyclic_gc():
        for b in range(m.buckets):
            read_counts(wd.reduced(b), counts, intern=own, symbols=symbols)
            report(progress, b + 1, m.buckets, "merging buckets")
        return stat.finalize(tok, counts, totals, m.options)


def merged_counts(wd: Workdir, progress: Progress | None = None) -> tuple[Counter, dict]:
    """The reduced buckets summed as they are stored (segmented words stay tuples of vocabulary ids) and the map's
    totals: what :func:`finalize` hands to the statistic, for a caller that keeps them in a file (the app's
    ``corpus-stats`` job); :func:`finalize_counts` of that file gives :func:`finalize`'s result."""
    m = wd.manifest()
    missing = sorted(set(range(m.buckets)) - wd.completed("reduce"))
    if missing:
        raise DataError(f"{wd.root}: reduce of bucket(s) {missing[:8]} not finished; rerun the job")
    totals = merged_totals(wd, m)
    check_not_empty(totals, len(m.shards))
    counts: Counter = Counter()
    with no_cyclic_gc():
        for b in range(m.buckets):
            read_counts(wd.reduced(b), counts)
            report(progress, b + 1, m.buckets, "merging buckets")
    return counts, totals


def finalize_counts(tok: LoadedTokenizer, stat_name: str, options: dict, path: Path, totals: dict) -> Any:
    """The statistic's result from a file of :func:`merged_counts` (written with
    :func:`~analysis.jobs.counts_io.write_counts`): read as :func:`finalize` reads the buckets (ids turned into the
    vocabulary's strings), then the statistic's finalize — the same result, key order included (a vocabulary id
    names one string, so ids that meet in the sum are the strings that meet in :func:`finalize`'s)."""
    stat = get_stat(stat_name)
    symbols = stat.symbols(tok, options)
    counts: Counter = Counter()
    with no_cyclic_gc():
        read_counts(path, counts, intern=_vocab_strings(tok) if symbols is None else None, symbols=symbols)
        return stat.finalize(tok, counts, totals, options)


# --------------------------------------------------------------------------------------------------
# In process (no datatrove, no workdir): the current single-process path
# --------------------------------------------------------------------------------------------------
def run_inprocess(
    tok: LoadedTokenizer,
    stat: Stat,
    opts: dict,
    shards: Sequence[Shard],
    progress: Progress | None = None,
    seconds: dict | None = None,
) -> tuple[Any, dict]:
    """The statistic over all shards in this process: map (one task), reduce (one bucket), finalize; returns
    (result, the map's additive totals: units, characters, …) and puts each stage's wall seconds in `seconds`."""
    pos = Position()
    total = sum(s.size for s in shards) or 1
    counts: Counter = Counter()
    done = [0, -1, time.monotonic()]

    def docs() -> Iterator[Doc]:
        for d in _docs(stat, opts, shards, range(len(shards)), pos):
            if d.shard != done[1]:
                if done[1] >= 0:
                    done[0] += shards[done[1]].size
                done[1] = d.shard
            now = time.monotonic()
            if progress is not None and now - done[2] >= 0.5:
                done[2] = now
                report(progress, done[0] + pos.bytes_read(), total, "counting")
            yield d

    t0 = time.perf_counter()
    totals = stat.map(tok, docs(), opts, counts.update)
    report(progress, total, total, "counting")
    check_not_empty(totals, len(shards))
    t1 = time.perf_counter()
    with no_cyclic_gc():  # as the reduce and finalize tasks of a job run
        out = stat.reduce(tok, counts, totals, opts)
        t2 = time.perf_counter()
        result = stat.finalize(tok, out, totals, opts)
    if seconds is not None:
        seconds.update(map=t1 - t0, reduce=t2 - t1, finalize=time.perf_counter() - t2)
    return result, totals
