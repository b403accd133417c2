"""The suite's own set-up (tests/conftest.py, tests/support.py): how a pytest-xdist worker shares the cores."""

from __future__ import annotations

import os
import subprocess
import sys

from support import share_the_cores


def test_each_worker_gets_its_share_of_the_cores_and_keeps_what_was_set():
    cores = len(os.sched_getaffinity(0))
    env = {"PYTEST_XDIST_WORKER_COUNT": "2", "RAYON_NUM_THREADS": "7"}
    assert share_the_cores(env) == max(1, cores // 2)
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == str(max(1, cores // 2))
    assert env["RAYON_NUM_THREADS"] == "7"  # a value the user set is kept
    assert (
        share_the_cores(big := {"PYTEST_XDIST_WORKER_COUNT": str(4 * cores)}) == 1
        and big["OMP_NUM_THREADS"] == "1"
    )
    for alone in ({}, {"PYTEST_XDIST_WORKER_COUNT": "1"}):
        assert share_the_cores(alone) == 0 and "OMP_NUM_THREADS" not in alone


def test_torch_in_a_process_the_worker_starts_uses_the_share():
    """What every CLI run, server and job worker of the suite inherits: torch sizes its pool from the variable."""
    env = {"PYTEST_XDIST_WORKER_COUNT": "2"}  # what a worker sets when nothing was set before it
    share_the_cores(env)
    got = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        env={**os.environ, **{k: v for k, v in env.items() if k.endswith("_NUM_THREADS")}},
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(got.stdout) == int(env["OMP_NUM_THREADS"])
