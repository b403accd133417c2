"""The process a background corpus job runs in (:func:`analysis.jobs.run.start`, used by the ``corpus-stats`` job
kind): ``python -m analysis.jobs.background WORKDIR CONFIG_JSON PARENT_PID``.

It runs the prepared workdir's map and reduce on the local executor (:func:`analysis.jobs.executors.run_workdir`)
and leaves a failure's message under the workdir's ``errors/``. It leads its own process group (the starter's
``cancel()`` stops it and datatrove's worker processes at once) and stops that group when its parent process is
gone (a killed job worker leaves nothing counting behind).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

from analysis.errors import AnalysisError

from .executors import ExecutorConfig, run_workdir
from .job import Workdir, record_error

#: How often the process checks that its parent is still there (seconds).
PARENT_POLL_SECONDS = 1.0


def _watch_parent(parent: int) -> None:
    """Stop this process group once the parent process is gone (this process was handed to another parent)."""

    def watch() -> None:
        while not threading.Event().wait(PARENT_POLL_SECONDS):
            if os.getppid() != parent:
                os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="toklab-corpus-parent", daemon=True).start()


def main(argv: list[str]) -> int:
    """Run the workdir's job; 0 when it finished, 2 for a data error, 3 for anything else (the message is in the
    workdir's ``errors/``)."""
    workdir, config, parent = argv
    _watch_parent(int(parent))
    wd = Workdir(workdir)
    try:
        run_workdir(wd, ExecutorConfig(**json.loads(config)), "local")
    except AnalysisError as e:
        if not wd.errors():  # a task's own failure is already there
            record_error(wd, "job", 0, e)
        return 2
    except BaseException as e:  # noqa: BLE001 - every failure becomes the job's message
        record_error(wd, "job", 0, e)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
