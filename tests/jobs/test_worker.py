"""Fault drills with REAL worker processes (`python -m analysis worker`, huey's consumer with processes): a worker
killed with -9 mid-job marks the job interrupted with a message and "run again" runs it; the server that started
the workers killed with -9 mid-job takes its workers with it, the workspace stays intact, and a restarted worker
marks the job interrupted and runs it again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from analysis.core.workspace import store_at
from analysis.jobs.queue import Job, JobStore, job_store_at

ROOT = Path(__file__).resolve().parents[2]
LONG = {"steps": 25, "seconds": 0.1, "artifact": "out.txt"}

pytestmark = pytest.mark.slow


@contextmanager
def worker(data: str, *extra: str) -> Iterator[subprocess.Popen]:
    """A worker on data folder `data`; stopped after (SIGTERM, then kill)."""
    env = {**os.environ, "TOKLAB_DATA": data}
    proc = subprocess.Popen([sys.executable, "-m", "analysis", "worker", "--workers", "1", *extra], cwd=ROOT,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def until(jobs: JobStore, ws: str, job_id: str, ok: Callable[[Job], bool], timeout: float = 60) -> Job:
    """Poll the record until `ok` holds (the condition, not a time, ends the wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = jobs.get(ws, job_id)
        assert job is not None
        if ok(job):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job never reached the expected state: {jobs.get(ws, job_id)}")


def _pid(jobs: JobStore, job_id: str) -> int:
    return int(jobs._read("SELECT pid FROM jobs WHERE id = ?", (job_id,))[0][0])


def test_killed_worker_interrupts_its_job_and_run_again_works(tmp_path: Path):
    data = str(tmp_path.resolve())
    jobs, ws = job_store_at(data), store_at(data).create()
    with worker(data) as consumer:
        job = jobs.submit(ws, "wait", LONG)
        running = until(jobs, ws, job.id, lambda j: j.state == "running" and j.fraction > 0)
        assert running.workers == 1 and running.stage.startswith("step ")
        child = _pid(jobs, job.id)
        assert child != consumer.pid  # the job runs in a worker process, not the consumer
        assert os.getpriority(os.PRIO_PROCESS, child) >= os.getpriority(os.PRIO_PROCESS, 0) + 10
        os.kill(child, signal.SIGKILL)
        dead = until(jobs, ws, job.id, lambda j: j.final)
        assert dead.state == "interrupted" and "worker" in dead.error
        assert store_at(data).get(ws, "artifact", "out.txt") is None
        # run again: a new job (huey's consumer has replaced the killed worker process meanwhile)
        again = jobs.run_again(ws, job.id)
        assert again is not None and again.id != job.id
        assert until(jobs, ws, again.id, lambda j: j.final).state == "done"
        assert store_at(data).read(ws, "artifact", "out.txt") == b"25 steps\n"


def test_killed_server_takes_its_workers_and_a_restart_recovers(tmp_path: Path):
    data = str(tmp_path.resolve())
    jobs, ws = job_store_at(data), store_at(data).create()
    store_at(data).put(ws, "result", "kept.json", {}, b'{"ok": 1}')
    server = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"]
    )  # stands in for serve.py
    try:
        with worker(data, "--parent", str(server.pid)) as consumer:
            job = jobs.submit(ws, "wait", LONG)
            until(jobs, ws, job.id, lambda j: j.state == "running")
            server.kill()
            server.wait()
            consumer.wait(30)  # the worker saw its server go and stopped
            seen = until(jobs, ws, job.id, lambda j: j.final)
            assert seen.state == "interrupted" and "stopped" in seen.error
        # the workspace is intact, and a new worker (a restarted server) runs the job again
        assert store_at(data).read(ws, "result", "kept.json") == b'{"ok": 1}'
        with worker(data):
            again = jobs.run_again(ws, job.id)
            assert until(jobs, ws, again.id, lambda j: j.final).state == "done"
            assert store_at(data).read(ws, "artifact", "out.txt") == b"25 steps\n"
    finally:
        if server.poll() is None:
            server.kill()
