"""Runners for the bad-input suite: the CLI in-process (fast) or in a subprocess (tracebacks on stderr, peak
memory), strict JSON parsing, and the rule every bad input must follow."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from bad_run import RUNNER, Run
from support import ROOT

from analysis.cli import main


@pytest.fixture
def cli(capsys):
    """Run `python -m analysis ARGS` in this process; returns a Run (tracebacks would fail the test)."""

    def run(*args: str | os.PathLike) -> Run:
        capsys.readouterr()
        try:
            rc = main([str(a) for a in args])
        except SystemExit as e:  # argparse
            rc = e.code if isinstance(e.code, int) else 1
        got = capsys.readouterr()
        return Run(rc, got.out, got.err)

    return run


@pytest.fixture
def cli_process(tmp_path):
    """Run the CLI in a fresh interpreter; the Run carries its peak resident memory in MB."""

    def run(*args: str | os.PathLike | bytes, env: dict[str, str] | None = None, timeout: int = 120) -> Run:
        full_env = {**os.environ, "RUST_BACKTRACE": "1", "PYTHONPATH": str(ROOT), **(env or {})}
        argv = [a if isinstance(a, bytes) else str(a) for a in args]
        p = subprocess.run(
            [sys.executable, "-c", RUNNER, *argv],
            cwd=tmp_path,
            env=full_env,
            capture_output=True,
            timeout=timeout,
        )
        err = p.stderr.decode("utf-8", "replace")
        peak = None
        for line in err.splitlines():
            if line.startswith("@@peak_mb="):
                peak = int(line.split("=", 1)[1])
        return Run(p.returncode, p.stdout.decode("utf-8", "replace"), err, peak)

    return run
