"""The suite's own set-up (tests/conftest.py, tests/support.py): how a pytest-xdist worker shares the cores."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support import ROOT, share_the_cores


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


GROUPED = """
import os, pathlib, pytest

@pytest.mark.xdist_group("journeys")
@pytest.mark.parametrize("k", range(6))
def test_grouped(k):
    (pathlib.Path(os.environ["GROUP_OUT"]) / f"g{k}").write_text(os.environ["PYTEST_XDIST_WORKER"])

@pytest.mark.parametrize("k", range(6))
def test_free(k):
    pass
"""
#: the suite's own collection hook, loaded from tests/conftest.py under another module name
SUITE_HOOK = """
import importlib.util, sys
sys.path[:0] = [{tests!r}, {root!r}]
spec = importlib.util.spec_from_file_location("suite_conftest", {conftest!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
pytest_collection_modifyitems = suite.pytest_collection_modifyitems
"""


@pytest.mark.slow
def test_a_group_runs_on_one_worker(tmp_path):
    """`--dist loadgroup` with the suite's collection hook: the six tests of one group all run on one worker
    (before support.tag_xdist_groups, pytest 9.2 with pytest-xdist 3.8 spread them over both)."""
    (tmp_path / "test_grouped.py").write_text(GROUPED, encoding="utf-8")
    hook = SUITE_HOOK.format(
        tests=str(ROOT / "tests"), root=str(ROOT), conftest=str(ROOT / "tests" / "conftest.py")
    )
    (tmp_path / "conftest.py").write_text(hook, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
         "test_grouped.py"],
        cwd=tmp_path, env={**os.environ, "GROUP_OUT": str(out)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    workers = {(out / f"g{k}").read_text() for k in range(6)}
    assert len(workers) == 1, workers
