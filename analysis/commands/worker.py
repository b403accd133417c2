"""`python -m analysis worker [--workers N] [--parent PID]`: run the app's jobs (:mod:`analysis.jobs.queue`) — the
model check, model exports, the gallery build — in N worker processes at a lower CPU priority than the server.

`scripts/serve.py` (and so `scripts/start.sh`) starts one with the server and stops it with the server
(``--parent``: the worker stops when that process is gone, even after a ``kill -9``). A lab runs more on other
hosts that share the data folder (see docs/jobs.md). On start, jobs marked running whose worker is gone become
*interrupted* (with "run again" in the app).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading

from huey.consumer import Consumer

from analysis.core import paths
from analysis.core.inputs import whole_number
from analysis.jobs.queue import HEARTBEAT_SECONDS, job_store_at, queue_huey, workers_default

NAME = "worker"
HELP = "run the app's background jobs (model check, exports, corpus jobs, gallery build) in worker processes"
#: Niceness added to the workers: the server's pages stay responsive while jobs run.
NICE = 10


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `worker`."""
    p.add_argument("--workers", type=whole_number(1, 64), default=None,
                   help="worker processes, each running one job at a time: the machine's one concurrency limit "
                        "for jobs (default TOKLAB_WORKERS, 1)")  # fmt: skip
    p.add_argument("--parent", type=whole_number(1), default=None,
                   help="stop when the process with this id is gone (the server that started the worker)")  # fmt: skip


def _watch_parent(pid: int) -> None:
    """Stop this consumer (SIGTERM to itself) once process `pid` is gone."""

    def watch() -> None:
        while True:
            if os.getppid() != pid:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    os.kill(os.getpid(), signal.SIGTERM)
                    return
                except PermissionError:
                    pass
            threading.Event().wait(1.0)

    threading.Thread(target=watch, name="toklab-parent-watch", daemon=True).start()


def run(args: argparse.Namespace) -> int:
    """Recover the jobs of workers that are gone, then run the consumer until SIGINT/SIGTERM."""
    n = args.workers or workers_default()
    if n < 1:
        print("TOKLAB_WORKERS is 0: no worker started")
        return 0
    root = str(paths.data_dir().resolve())
    jobs = job_store_at(root)
    stale = jobs.check_stale()
    if stale:
        print(f"[worker] {stale} job(s) of a stopped worker marked interrupted")
    os.nice(NICE)
    q = queue_huey(root)

    @q.huey.on_startup()
    def announce() -> None:  # in each worker process
        me = os.getpid()
        store = job_store_at(root)
        store.register_worker(me)

        def beat() -> None:
            while True:
                threading.Event().wait(HEARTBEAT_SECONDS)
                try:
                    store.register_worker(me)
                except Exception:  # noqa: BLE001 - a missed heartbeat is retried
                    pass

        threading.Thread(target=beat, name="toklab-worker-heartbeat", daemon=True).start()

    if args.parent:
        _watch_parent(args.parent)
    logging.basicConfig(level=logging.INFO, format="[worker] %(asctime)s %(message)s")
    print(f"[worker] {n} worker process(es) on {root} (nice +{NICE})", flush=True)
    # an idle worker looks at the queue at least once a second (SQLite: a cheap read), and a worker process that
    # died is replaced within 5 s
    Consumer(q.huey, workers=n, worker_type="process", periodic=False, max_delay=1.0, check_worker_health=True,
             health_check_interval=5).run()  # fmt: skip
    return 0
