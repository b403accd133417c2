"""Jobs outside the tab: heavy work (a model check, a model export, the gallery build) runs as a job of a task queue
(huey on SQLite) in worker processes (`python -m analysis worker`), never in the server's threads.

Two SQLite files under the data folder (:func:`analysis.core.paths.data_dir`, ``TOKLAB_DATA``):

* ``queue.sqlite3`` — huey's queue (:func:`queue_huey`): messages ``execute(job_id, root)`` serialized as JSON
  (:class:`JsonSerializer`; never pickle), with a priority (:data:`USER_PRIORITY` before
  :data:`BACKGROUND_PRIORITY`, so a gallery build yields to users).
* ``jobs.sqlite3`` — the job records (:class:`JobStore`, WAL, schema versioned): id (random, unguessable), the
  workspace's key (the SHA-256 of its id, as :mod:`analysis.core.workspace` stores it), kind, inputs' hash,
  state (queued / running / done / failed / cancelled / interrupted), stage, fraction, log tail, result (a JSON
  document), error, times, the worker's pid and heartbeat; and the live workers.

A job *kind* is a function ``run(params, ctx) -> dict | None`` named in :data:`analysis.jobs.kinds.KINDS`; params
are plain JSON naming workspace items or model references, never closures. :meth:`JobStore.submit` in the same
workspace with the same kind and params returns the job already there unless it failed, was cancelled or was
interrupted, or is done but a file it kept in the workspace is gone (deleted from the Files list, or replaced by
another job's file of the same name: a done job's result lists what it kept under :data:`KEPT`, see
:func:`missing_outputs`); a job is reached only with its workspace's id (:meth:`JobStore.get`,
:meth:`JobStore.jobs`).

Fairness: each worker process runs one job at a time, so the worker count is the one concurrency limit for the
machine's CPU/GPU work; a workspace runs at most ``TOKLAB_JOBS_PER_WORKSPACE`` jobs at once (default 2; its
other jobs wait in the queue); workers run at a lower CPU priority than the server (``os.nice(10)``).

Why one file: the records, the queue's messages and the running of a job share one set of states and one
schema (a claim, a heartbeat, a cancel flag and a finish are each one transaction on the same table); split, each
part would need the others' private SQL.

Faults: a running job's worker writes a heartbeat every :data:`HEARTBEAT_SECONDS`; a job whose worker process is
gone (killed, the machine restarted) or silent for :data:`STALE_SECONDS` is marked *interrupted* with a message
(on the next read, and when a worker starts), and "run again" submits it anew.
"""

from __future__ import annotations

import datetime
import errno
import hashlib
import json
import os
import re
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from huey import SqliteHuey
from huey.registry import Message
from huey.serializer import Serializer

from analysis.core import paths, sqlite_db
from analysis.core.cache import memoize
from analysis.core.progress import Cancelled
from analysis.core.workspace import WorkspaceStore, store_at, valid_id
from analysis.errors import AnalysisError, DataError

from .kinds import job_function, kind_names

SCHEMA_VERSION = 1
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE jobs (
        id TEXT PRIMARY KEY, ws TEXT NOT NULL, kind TEXT NOT NULL, label TEXT NOT NULL, params TEXT NOT NULL,
        inputs TEXT NOT NULL, state TEXT NOT NULL, stage TEXT NOT NULL DEFAULT '', fraction REAL NOT NULL DEFAULT 0,
        log TEXT NOT NULL DEFAULT '[]', result TEXT, error TEXT, priority INTEGER NOT NULL,
        created REAL NOT NULL, started REAL, ended REAL, pid INTEGER, host TEXT, heartbeat REAL,
        cancel INTEGER NOT NULL DEFAULT 0);
    CREATE INDEX jobs_ws ON jobs (ws, inputs);
    CREATE INDEX jobs_state ON jobs (state, priority, created);
    CREATE TABLE workers (host TEXT NOT NULL, pid INTEGER NOT NULL, started REAL NOT NULL, heartbeat REAL NOT NULL,
        PRIMARY KEY (host, pid))
    """,
)
DB_NAME = "jobs.sqlite3"
QUEUE_NAME = "queue.sqlite3"
STATES = ("queued", "running", "done", "failed", "cancelled", "interrupted")
#: States after which a job never changes again (and "run again" is offered for the last three).
FINAL = ("done", "failed", "cancelled", "interrupted")
AGAIN = ("failed", "cancelled", "interrupted")
USER_PRIORITY = 10
BACKGROUND_PRIORITY = 0
LOG_LINES = 50
HEARTBEAT_SECONDS = 2.0
STALE_SECONDS = 30.0
#: How long a job waits before it asks again for a place when its workspace already runs its cap of jobs.
WAIT_SECONDS = 1.0
#: How many past durations of a kind make its estimate.
PAST_RUNS = 20
INTERRUPTED = "the worker running this job stopped (killed, or the server restarted) before it finished"
#: The key of a done job's stored result that lists the workspace items the job wrote, ``[[kind, name, sha256 | None],
#: ...]`` (the SHA-256 of the item's file): a done job whose items are gone is run again, not reused.
KEPT = "kept_files"


def workers_default() -> int:
    """How many worker processes `python -m analysis worker` and the start script run (``TOKLAB_WORKERS``, 1)."""
    return _env_int("TOKLAB_WORKERS", 1, 0)


def per_workspace_cap() -> int:
    """How many jobs of one workspace may run at once (``TOKLAB_JOBS_PER_WORKSPACE``, default 2)."""
    return _env_int("TOKLAB_JOBS_PER_WORKSPACE", 2, 1)


def _env_int(name: str, default: int, low: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        return max(low, int(raw)) if raw else default
    except ValueError:
        raise DataError(f"{name} must be a whole number, got {raw!r}") from None


def _ws_key(ws_id: str) -> str:
    return hashlib.sha256(ws_id.encode("ascii")).hexdigest()


def canonical(params: dict[str, Any]) -> str:
    """Params as canonical JSON (sorted keys): what the inputs' hash covers. DataError for anything not plain JSON."""
    try:
        return json.dumps(params, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise DataError(f"job parameters must be plain JSON: {e}") from None


def inputs_hash(kind: str, params: dict[str, Any]) -> str:
    """The hash that makes two submissions the same job: kind and canonical params."""
    return hashlib.sha256(f"{kind}\n{canonical(params)}".encode()).hexdigest()


def _alive(pid: int | None) -> bool:
    """Whether process `pid` of this machine runs (a zombie, killed but not yet reaped, does not)."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


# ---------------------------------------------------------------------------------------------- records
@dataclass
class Job:
    """One job as its workspace sees it."""

    id: str
    kind: str
    label: str
    params: dict[str, Any]
    state: str
    stage: str
    fraction: float
    log: list[str]
    result: dict[str, Any] | None
    error: str | None
    created: float
    started: float | None
    ended: float | None
    #: 1-based place among the queued jobs (None unless queued)
    place: int | None = None
    #: seconds from now until it starts / ends (None: unknown)
    starts_in: float | None = None
    ends_in: float | None = None
    workers: int = 0
    #: a done job's workspace items, ``[kind, name, sha256 | None]`` (kept beside its result: :data:`KEPT`)
    kept: list[list[Any]] = field(default_factory=list)

    @property
    def final(self) -> bool:
        """Whether the job ended (done, failed, cancelled or interrupted)."""
        return self.state in FINAL

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON document (for the CLI and tests)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


_COLUMNS = "id, kind, label, params, state, stage, fraction, log, result, error, created, started, ended"


def _job(row: tuple[Any, ...]) -> Job:
    i, kind, label, params, state, stage, frac, log, result, error, created, started, ended = row
    doc = json.loads(result) if result else None
    kept = doc.pop(KEPT, None) if isinstance(doc, dict) else None  # the job's own record, not its result
    return Job(i, kind, label, json.loads(params), state, stage, frac, json.loads(log), doc, error, created,
               started, ended, kept=kept if isinstance(kept, list) else [])  # fmt: skip


class JobStore:
    """The job records under one data folder (default :func:`analysis.core.paths.data_dir`)."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else paths.data_dir()
        self.root.mkdir(parents=True, exist_ok=True)
        self.db = self.root / DB_NAME
        self._migrate()
        self._anchor = self._connect()  # keeps the WAL open (see WorkspaceStore)

    @property
    def workspaces(self) -> WorkspaceStore:
        """The workspace store of the same data folder (inputs and outputs of jobs)."""
        return store_at(str(self.root.resolve()))

    # ------------------------------------------------------------------ database
    def _connect(self) -> sqlite3.Connection:
        c = sqlite3.connect(self.db, timeout=60, isolation_level=None)
        c.execute("PRAGMA synchronous = NORMAL")
        return c

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with sqlite_db.transaction(self._connect) as c:
            yield c

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return sqlite_db.read(self._connect, sql, args)

    def schema_version(self) -> int:
        """The schema version the database is at (0: empty)."""
        with closing(self._connect()) as c:
            return sqlite_db.schema_version(c)

    def _migrate(self) -> None:
        sqlite_db.migrate(self.db, self._connect, MIGRATIONS, SCHEMA_VERSION, "job store")

    # ------------------------------------------------------------------ the workspace's side
    def submit(
        self, ws_id: str, kind: str, params: dict[str, Any], *, label: str = "", priority: int = USER_PRIORITY
    ) -> Job:
        """Queue a job of `kind` with `params` for workspace `ws_id`, or return the one with the same inputs
        already there (queued, running or done; a failed, cancelled or interrupted one is submitted anew)."""
        if kind not in kind_names():
            raise DataError(f"unknown job kind {kind!r}; choose one of {', '.join(kind_names())}")
        if not self.workspaces.exists(ws_id):
            raise DataError("this workspace is no longer on the server: reload the page to open a new one")
        digest, key = inputs_hash(kind, params), _ws_key(ws_id)
        with self._tx() as c:
            row = c.execute("SELECT id, state, result FROM jobs WHERE ws = ? AND inputs = ? AND state IN "
                            "('queued', 'running', 'done') ORDER BY created DESC LIMIT 1", (key, digest)).fetchone()  # fmt: skip
            if (
                row
                and row[1] == "done"
                and missing_outputs(self.workspaces, ws_id, json.loads(row[2] or "{}"))
            ):
                row = None  # its files were deleted: the same inputs run again
            if row:
                job_id, new = row[0], False
            else:
                job_id, new = secrets.token_urlsafe(16), True
                c.execute("INSERT INTO jobs (id, ws, kind, label, params, inputs, state, priority, created) "
                          "VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?)",
                          (job_id, key, kind, label or kind, canonical(params), digest, priority, time.time()))  # fmt: skip
        if new:
            enqueue(self.root, job_id, ws_id, priority)
        job = self.get(ws_id, job_id)
        assert job is not None
        return job

    def get(self, ws_id: str, job_id: str) -> Job | None:
        """A job of workspace `ws_id` with its place in the queue and estimates (None: no such job *there*)."""
        if not valid_id(ws_id) or not isinstance(job_id, str):
            return None
        self.check_stale()
        rows = self._read(f"SELECT {_COLUMNS} FROM jobs WHERE ws = ? AND id = ?", (_ws_key(ws_id), job_id))
        if not rows:
            return None
        job = _job(rows[0])
        self._estimate(job)
        return job

    def jobs(self, ws_id: str) -> list[Job]:
        """The workspace's jobs, newest first."""
        if not valid_id(ws_id):
            return []
        self.check_stale()
        rows = self._read(
            f"SELECT {_COLUMNS} FROM jobs WHERE ws = ? ORDER BY created DESC", (_ws_key(ws_id),)
        )
        return [_job(r) for r in rows]

    def cancel(self, ws_id: str, job_id: str) -> bool:
        """Cancel a job of this workspace: a queued one at once, a running one at its next progress report (its
        kind raises :class:`~analysis.core.progress.Cancelled`). False when there is no such job or it ended."""
        if not valid_id(ws_id):
            return False
        with self._tx() as c:
            key = _ws_key(ws_id)
            c.execute("UPDATE jobs SET state = 'cancelled', ended = ?, error = 'cancelled before it started' "
                      "WHERE ws = ? AND id = ? AND state = 'queued'", (time.time(), key, job_id))  # fmt: skip
            if c.execute("SELECT changes()").fetchone()[0]:
                return True
            c.execute(
                "UPDATE jobs SET cancel = 1 WHERE ws = ? AND id = ? AND state = 'running'", (key, job_id)
            )
            return bool(c.execute("SELECT changes()").fetchone()[0])

    def run_again(self, ws_id: str, job_id: str) -> Job | None:
        """Submit a failed, cancelled or interrupted job of this workspace anew (a new id); None when there is no
        such job. A job that is queued, running or done is returned as it is."""
        rows = self._read("SELECT kind, params, label, priority FROM jobs WHERE ws = ? AND id = ?",
                          (_ws_key(ws_id), job_id)) if valid_id(ws_id) else []  # fmt: skip
        if not rows:
            return None
        kind, params, label, priority = rows[0]
        return self.submit(ws_id, kind, json.loads(params), label=label, priority=priority)

    def missing_outputs(self, ws_id: str, job: Job) -> list[str]:
        """The names of the files a done job of workspace `ws_id` kept there that are gone
        (:func:`job_missing_outputs`)."""
        return job_missing_outputs(self.workspaces, ws_id, job)

    def forget(self, ws_id: str) -> int:
        """Remove the job records of workspace `ws_id` (it was deleted); how many. A running one stops at its next
        progress report (its record is gone: :meth:`report` says "cancelled")."""
        if not valid_id(ws_id):
            return 0
        with self._tx() as c:
            c.execute("DELETE FROM jobs WHERE ws = ?", (_ws_key(ws_id),))
            return int(c.execute("SELECT changes()").fetchone()[0])

    def drop_orphans(self) -> int:
        """Remove the job records whose workspace is no longer in the workspace store (pruned, deleted); how many."""
        live = self.workspaces.keys()
        with self._tx() as c:
            gone = [k for (k,) in c.execute("SELECT DISTINCT ws FROM jobs").fetchall() if k not in live]
            n = 0
            for k in gone:
                n += c.execute("DELETE FROM jobs WHERE ws = ?", (k,)).rowcount
            return n

    # ------------------------------------------------------------------ estimates
    def typical_seconds(self, kind: str) -> float | None:
        """The median duration of the last finished runs of `kind` (None: never finished)."""
        rows = self._read("SELECT ended - started FROM jobs WHERE kind = ? AND state = 'done' AND started IS NOT NULL "
                          "ORDER BY ended DESC LIMIT ?", (kind, PAST_RUNS))  # fmt: skip
        if not rows:
            return None
        values = sorted(r[0] for r in rows)
        return values[len(values) // 2]

    def live_workers(self) -> int:
        """How many worker processes answered within :data:`STALE_SECONDS`."""
        rows = self._read("SELECT COUNT(*) FROM workers WHERE heartbeat >= ?", (time.time() - STALE_SECONDS,))
        return int(rows[0][0])

    def _estimate(self, job: Job) -> None:
        """Fill `place`, `starts_in`, `ends_in` and `workers` of a job (estimates from past durations of each
        kind: ahead of a queued job are the running jobs' remainders and the queued jobs before it)."""
        job.workers = self.live_workers()
        now = time.time()
        typical: dict[str, float | None] = {}

        def est(kind: str) -> float | None:
            if kind not in typical:
                typical[kind] = self.typical_seconds(kind)
            return typical[kind]

        if job.state == "running":
            t = est(job.kind)
            job.ends_in = None if t is None else max(0.0, t - (now - (job.started or now)))
            return
        if job.state != "queued":
            return
        ahead = self._read("SELECT kind, created FROM jobs WHERE state = 'queued' AND (priority > ? OR "
                           "(priority = ? AND created < ?)) ORDER BY priority DESC, created",
                           (self._priority(job.id), self._priority(job.id), job.created))  # fmt: skip
        job.place = len(ahead) + 1
        if job.workers == 0:  # no worker answers: when it starts is unknown
            return
        running = self._read("SELECT kind, started FROM jobs WHERE state = 'running'")
        slots: list[float] = []
        for kind, started in running:
            t = est(kind)
            if t is None:
                return
            slots.append(max(0.0, t - (now - (started or now))))
        width = max(1, job.workers, len(slots))
        slots += [0.0] * (width - len(slots))
        for kind, _ in ahead:
            t = est(kind)
            if t is None:
                return
            slots.sort()
            slots[0] += t
        mine = est(job.kind)
        job.starts_in = min(slots)
        job.ends_in = None if mine is None else job.starts_in + mine

    def _priority(self, job_id: str) -> int:
        rows = self._read("SELECT priority FROM jobs WHERE id = ?", (job_id,))
        return int(rows[0][0]) if rows else USER_PRIORITY

    # ------------------------------------------------------------------ the worker's side
    def claim(self, job_id: str, cap: int | None = None) -> str:
        """A worker takes a queued job: "run" (it is now running here), "wait" (its workspace runs its cap of
        jobs: ask again later) or "skip" (cancelled, or no longer queued)."""
        cap = per_workspace_cap() if cap is None else cap
        with self._tx() as c:
            row = c.execute("SELECT ws, state FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if not row or row[1] != "queued":
                return "skip"
            busy = c.execute(
                "SELECT COUNT(*) FROM jobs WHERE ws = ? AND state = 'running'", (row[0],)
            ).fetchone()[0]
            if busy >= cap:
                return "wait"
            now = time.time()
            c.execute("UPDATE jobs SET state = 'running', started = ?, heartbeat = ?, pid = ?, host = ?, "
                      "stage = 'starting' WHERE id = ?", (now, now, os.getpid(), socket.gethostname(), job_id))  # fmt: skip
        return "run"

    def ws_id_check(self, ws_id: str, job_id: str) -> bool:
        """Whether job `job_id` belongs to workspace `ws_id`."""
        return bool(self._read("SELECT 1 FROM jobs WHERE id = ? AND ws = ?", (job_id, _ws_key(ws_id))))

    def report(self, job_id: str, fraction: float | None, stage: str | None, lines: list[str]) -> bool:
        """Write a running job's progress, stage and new log lines, and its heartbeat; whether it was cancelled."""
        with self._tx() as c:
            row = c.execute("SELECT log, cancel FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if not row:
                return True
            log = (json.loads(row[0]) + lines)[-LOG_LINES:]
            c.execute("UPDATE jobs SET fraction = COALESCE(?, fraction), stage = COALESCE(?, stage), log = ?, "
                      "heartbeat = ? WHERE id = ?", (fraction, stage, json.dumps(log), time.time(), job_id))  # fmt: skip
            return bool(row[1])

    def heartbeat(self, job_id: str) -> None:
        """The running job's worker is alive."""
        with self._tx() as c:
            c.execute(
                "UPDATE jobs SET heartbeat = ? WHERE id = ? AND state = 'running'", (time.time(), job_id)
            )

    def finish(
        self, job_id: str, state: str, *, result: dict[str, Any] | None = None, error: str | None = None
    ) -> None:
        """A running job ends: done (with its result), failed or cancelled (with a message)."""
        text = json.dumps(result, ensure_ascii=False, allow_nan=False) if result is not None else None
        with self._tx() as c:
            c.execute("UPDATE jobs SET state = ?, result = ?, error = ?, ended = ?, fraction = CASE WHEN ? = 'done' "
                      "THEN 1.0 ELSE fraction END WHERE id = ? AND state = 'running'",
                      (state, text, error, time.time(), state, job_id))  # fmt: skip

    def check_stale(self) -> int:
        """Mark running jobs whose worker is gone as interrupted: a process of this machine that no longer runs,
        or no heartbeat for :data:`STALE_SECONDS`. Returns how many."""
        rows = self._read("SELECT id, pid, host, heartbeat FROM jobs WHERE state = 'running'")
        host, now = socket.gethostname(), time.time()
        gone = [i for i, pid, h, beat in rows
                if (h == host and not _alive(pid)) or (beat or 0) < now - STALE_SECONDS]  # fmt: skip
        if gone:
            with self._tx() as c:
                for i in gone:
                    c.execute("UPDATE jobs SET state = 'interrupted', error = ?, ended = ? WHERE id = ? AND "
                              "state = 'running'", (INTERRUPTED, now, i))  # fmt: skip
        return len(gone)

    def register_worker(self, pid: int) -> None:
        """A worker process announces itself (and renews its heartbeat)."""
        now = time.time()
        with self._tx() as c:
            c.execute("INSERT INTO workers VALUES (?, ?, ?, ?) ON CONFLICT (host, pid) DO UPDATE SET heartbeat = ?",
                      (socket.gethostname(), pid, now, now, now))  # fmt: skip
            c.execute("DELETE FROM workers WHERE heartbeat < ?", (now - 10 * STALE_SECONDS,))

    def unregister_worker(self, pid: int) -> None:
        """A worker process leaves."""
        with self._tx() as c:
            c.execute("DELETE FROM workers WHERE host = ? AND pid = ?", (socket.gethostname(), pid))


@memoize(maxsize=4)
def job_store_at(root: str) -> JobStore:
    """The job store under data folder `root` (one object per folder in this process)."""
    return JobStore(root)


def default_jobs() -> JobStore:
    """The job store under the configured data folder (``TOKLAB_DATA``)."""
    return job_store_at(str(paths.data_dir().resolve()))


# ---------------------------------------------------------------------------------------------- the queue
class JsonSerializer(Serializer):
    """huey's messages as JSON (never pickle): a message's fields, datetimes as ISO text, tuples as lists."""

    def _serialize(self, data: Any) -> bytes:
        return json.dumps(_encode(data), allow_nan=False).encode("utf-8")

    def _deserialize(self, data: bytes) -> Any:
        return _decode(json.loads(data.decode("utf-8")))


def _encode(x: Any) -> Any:
    if isinstance(x, Message):
        return {"__message__": {k: _encode(v) for k, v in x._asdict().items()}}
    if isinstance(x, datetime.datetime):
        return {"__datetime__": x.isoformat()}
    if isinstance(x, (list, tuple)):
        return [_encode(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _encode(v) for k, v in x.items()}
    if x is None or isinstance(x, (str, int, float, bool)):
        return x
    raise TypeError(f"a queue message holds only plain JSON, not {type(x).__name__}")


def _decode(x: Any) -> Any:
    if isinstance(x, list):
        return [_decode(v) for v in x]
    if isinstance(x, dict):
        if set(x) == {"__message__"}:
            return Message(**{k: _decode(v) for k, v in x["__message__"].items()})
        if set(x) == {"__datetime__"}:
            return datetime.datetime.fromisoformat(x["__datetime__"])
        return {k: _decode(v) for k, v in x.items()}
    return x


@dataclass
class _Queue:
    huey: SqliteHuey
    task: Any
    immediate: bool = False


def queue_huey(root: str | Path | None = None) -> _Queue:
    """The huey queue of a data folder (``queue.sqlite3``) and its one task, ``execute(job_id, root, ws_id)``."""
    return _queue_at(str(Path(root if root is not None else paths.data_dir()).resolve()))


@memoize(maxsize=8)
def _queue_at(root: str) -> _Queue:
    """One queue object per data folder in this process."""
    Path(root).mkdir(parents=True, exist_ok=True)
    h = SqliteHuey(
        "toklab", filename=str(Path(root) / QUEUE_NAME), results=False, serializer=JsonSerializer()
    )
    return _Queue(h, h.task(name="execute")(execute))


def set_immediate(root: str | Path, on: bool = True) -> None:
    """Run this data folder's jobs in the calling process as they are submitted (tests; huey's immediate mode)."""
    q = queue_huey(root)
    q.huey.immediate = on
    q.immediate = on


def enqueue(root: str | Path, job_id: str, ws_id: str, priority: int, delay: float | None = None) -> None:
    """Put `execute(job_id, root, ws_id)` on the queue of data folder `root` (after `delay` seconds). The
    workspace id travels only in the queue's message (the job record keeps its hash), so that the worker can read
    and write the workspace's items; the message is gone once the job ran."""
    q = queue_huey(root)
    args = (job_id, str(Path(root).resolve()), ws_id)
    if delay:  # (in immediate mode the scheduled message stays in memory: tests claim such a job themselves)
        q.task.schedule(args=args, delay=delay, priority=priority)
    else:
        q.huey.enqueue(q.task.s(*args, priority=priority))


def missing_outputs(store: WorkspaceStore, ws_id: str, result: dict[str, Any] | None) -> list[str]:
    """The names of the workspace items a done job's `result` says it kept (:data:`KEPT`) that are no longer
    there as the job wrote them: removed, their file gone, or replaced by another file of the same name. A result
    from before :data:`KEPT` names its files as a model export (``artifacts``: ``[[name, label], ...]``) and a
    model check (``model_artifact``) do: those are checked for a file."""
    if not isinstance(result, dict):
        return []
    missing = []
    kept = result.get(KEPT)
    if isinstance(kept, list):
        for entry in kept:
            if not (isinstance(entry, list) and len(entry) == 3):
                continue
            kind, name, digest = entry
            item = store.get(ws_id, str(kind), str(name))
            path = store.file_path(ws_id, str(kind), str(name)) if item and item.has_file else None
            if item is None or (digest is not None and (path is None or path.name != digest)):
                missing.append(str(name))
        return missing
    names = [a[0] for a in result.get("artifacts") or [] if isinstance(a, list) and a]
    names += [result["model_artifact"]] if result.get("model_artifact") else []
    return [str(n) for n in names if store.file_path(ws_id, "artifact", str(n)) is None]


def job_missing_outputs(store: WorkspaceStore, ws_id: str, job: Job) -> list[str]:
    """The names of the files done `job` of workspace `ws_id` kept there that are gone (:func:`missing_outputs`);
    [] for a job that is not done."""
    if job.state != "done":
        return []
    return missing_outputs(store, ws_id, {**(job.result or {}), KEPT: job.kept} if job.kept else job.result)


# ---------------------------------------------------------------------------------------------- running a job
class JobContext:
    """What a job kind's function gets: progress, the stop flag, a log, and its workspace (read inputs, write
    outputs)."""

    def __init__(self, jobs: JobStore, job_id: str, ws_id: str | None = None) -> None:
        self.jobs, self.job_id = jobs, job_id
        self._ws_id = ws_id
        self._lines: list[str] = []
        self._last = 0.0
        self._stop = False
        self._stage: str | None = None
        #: the workspace items this job wrote, ``[kind, name, sha256 | None]`` (a done job's result lists them)
        self.kept: list[list[Any]] = []

    @property
    def workspace(self) -> WorkspaceStore:
        """The workspace store (use :meth:`put_file`, :meth:`read`, :meth:`file_path` for this job's workspace)."""
        return self.jobs.workspaces

    @property
    def ws_key(self) -> str:
        """The SHA-256 of the job's workspace id (names a per-workspace scratch folder; never the id itself)."""
        return _ws_key(self._ws_for())

    def _ws_for(self) -> str:
        if self._ws_id is None:
            raise DataError("this job has no workspace id (it was submitted without one)")
        return self._ws_id

    def file_path(self, kind: str, name: str) -> Path:
        """The file of an item of the job's workspace (DataError: not there)."""
        p = self.workspace.file_path(self._ws_for(), kind, name)
        if p is None:
            raise DataError(f"{name}: not in this workspace (deleted, or the workspace expired)")
        return p

    def put_file(self, kind: str, name: str, meta: dict[str, Any], src: str | Path) -> None:
        """Store a file as an item of the job's workspace (moved from `src`)."""
        self.workspace.put_file(self._ws_for(), kind, name, meta, src, move=True)
        stored = self.workspace.file_path(self._ws_for(), kind, name)
        self._kept(kind, name, stored.name if stored is not None else None)

    def put(self, kind: str, name: str, meta: dict[str, Any], data: bytes | None = None) -> None:
        """Store an item (with small bytes) in the job's workspace."""
        self.workspace.put(self._ws_for(), kind, name, meta, data)
        self._kept(kind, name, hashlib.sha256(data).hexdigest() if data is not None else None)

    def _kept(self, kind: str, name: str, digest: str | None) -> None:
        self.kept = [k for k in self.kept if k[:2] != [kind, name]] + [[kind, name, digest]]

    def log(self, line: str) -> None:
        """Add a line to the job's log tail."""
        self._lines.append(str(line))
        self._flush(force=False)

    def progress(self, fraction: float | None, stage: str | None = None) -> None:
        """Report progress (0..1) and the stage's name; raises Cancelled when the job was cancelled."""
        # a new stage is a message that differs by more than its numbers ("est_Latn 3/20" and "est_Latn 4/20"
        # are one stage): it goes to the log and is written at once; within a stage, at most twice a second
        new_stage = stage is not None and _stage_of(stage) != _stage_of(self._stage or "")
        if stage is not None:
            self._stage = stage
            if new_stage:
                self._lines.append(stage)
        self._fraction = fraction
        self._flush(force=new_stage)
        if self._stop:
            raise Cancelled("cancelled")

    def engine_progress(self, done: float, total: float | None, message: str = "") -> None:
        """:func:`progress` in the engine's protocol (`progress(done, total, message)`)."""
        self.progress(min(1.0, max(0.0, done / total)) if total else None, message or None)

    def should_stop(self) -> bool:
        """Whether the job was cancelled (checked against the record at most every half second)."""
        self._flush(force=False)
        return self._stop

    def _flush(self, force: bool) -> None:
        now = time.monotonic()
        if not force and now - self._last < 0.5:
            return
        self._last = now
        lines, self._lines = self._lines, []
        self._stop = (
            self.jobs.report(self.job_id, getattr(self, "_fraction", None), self._stage, lines) or self._stop
        )


def _stage_of(message: str) -> str:
    return re.sub(r"\d+", "#", message)


def execute(job_id: str, root: str, ws_id: str) -> None:
    """huey's task: run job `job_id` of data folder `root` to its end (or put it back when its workspace already
    runs its cap of jobs). Every failure becomes the job's message; nothing is raised to huey."""
    jobs = job_store_at(root)
    if not jobs.ws_id_check(ws_id, job_id):
        return
    verdict = jobs.claim(job_id)
    if verdict == "wait":
        enqueue(root, job_id, ws_id, jobs._priority(job_id), delay=WAIT_SECONDS)
        return
    if verdict != "run":
        return
    run_claimed(jobs, job_id, ws_id)


def run_claimed(jobs: JobStore, job_id: str, ws_id: str) -> None:
    """Run a job this process claimed: its kind's function with a context, a heartbeat thread, the outcome."""
    rows = jobs._read("SELECT kind, params FROM jobs WHERE id = ?", (job_id,))
    kind, params = rows[0][0], json.loads(rows[0][1])
    ctx = JobContext(jobs, job_id, ws_id)
    done = threading.Event()

    def beat() -> None:
        while not done.wait(HEARTBEAT_SECONDS):
            try:
                jobs.heartbeat(job_id)
            except sqlite3.Error:
                pass

    threading.Thread(target=beat, name="toklab-job-heartbeat", daemon=True).start()
    try:
        result = job_function(kind)(params, ctx)
        ctx._flush(force=True)
        result = result if isinstance(result, dict) else {}
        jobs.finish(job_id, "done", result={**result, KEPT: ctx.kept} if ctx.kept else result)
    except Cancelled:
        ctx._flush(force=True)
        jobs.finish(job_id, "cancelled", error="cancelled: what was finished before the cancel is not kept")
    except OSError as e:
        if e.errno == errno.ENOSPC:
            message = f"the server's disk is full ({e.strerror or e}): the job's output could not be stored"
        else:
            message = f"{type(e).__name__}: {e}"
        jobs.finish(job_id, "failed", error=paths.public_text(message))
    except AnalysisError as e:
        jobs.finish(job_id, "failed", error=paths.public_text(str(e)))
    except Exception as e:  # noqa: BLE001 - a job hands every failure to its record
        jobs.finish(job_id, "failed", error=paths.public_text(f"{type(e).__name__}: {e}"))
    finally:
        done.set()
