"""Time a run of the test suite and write it to `bench/results/suite-<lane>[-busy].json` (docs/tests.md's table).

The lanes: `ci` runs `bash .ci/run` (install, lint, the whole suite; run it from a fresh clone with an empty HOME
for a cold figure), `fast` the fast lane (`pytest -n 2 -m "not slow and not e2e"`). The output is shown as it
comes; the figures are the run's wall time, pytest's own time and its counts (from pytest's last summary line).
`--busy` labels a run made with both cores kept busy by another job. `--command` runs another command line (a
pytest run of one file, to try this script out); its summary line is read the same way.

Usage: python bench/bench_suite.py [--lane ci|fast] [--busy] [--command "…"]
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import ROOT, Run  # noqa: E402

LANES = {
    "ci": ["bash", ".ci/run"],
    "fast": [".venv/bin/python", "-m", "pytest", "-n", "2", "-m", "not slow and not e2e", "-q"],
}
#: pytest's final summary line, e.g. "==== 3 failed, 1,196 passed, 4 warnings in 665.12s (0:11:05) ====" or, with
#: -q, "894 passed in 101.3s".
SUMMARY = re.compile(r"^=*\s*(?P<counts>(?:\d[\d,]* \w+(?:, )?)+) in (?P<s>[\d.]+)s\b")


def parse_summary(output: str) -> dict[str, float | int] | None:
    """The counts (passed, failed, skipped, errors, …) and seconds of pytest's last summary line, None if absent."""
    for line in reversed(output.splitlines()):
        m = SUMMARY.match(line.strip())
        if m:
            counts: dict[str, float | int] = {}
            for part in m.group("counts").split(", "):
                n, word = part.split(" ", 1)
                counts[word.strip()] = int(n.replace(",", ""))
            counts["pytest_s"] = float(m.group("s"))
            return counts
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the lane, stream its output, write the results file; the exit status is the run's."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lane", choices=sorted(LANES), default="ci")
    ap.add_argument("--busy", action="store_true", help="both cores were kept busy by another job")
    ap.add_argument("--command", default=None, help="run this command line instead of the lane's")
    args = ap.parse_args(argv)
    cmd = shlex.split(args.command) if args.command else LANES[args.lane]
    run = Run(
        "suite",
        variant=args.lane + ("-busy" if args.busy else ""),
        argv=["bench/bench_suite.py", *(argv or sys.argv[1:])],
    )
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        sys.stdout.write(line)
        seen.append(line)
    rc = proc.wait()
    whole = time.perf_counter() - t0
    summary = parse_summary("".join(seen[-200:]))
    if summary is None:
        print(
            f"bench_suite: no pytest summary line in the output (exit {rc}); nothing written", file=sys.stderr
        )
        return rc or 1
    figures = {
        "lane": args.lane,
        "cores": "busy" if args.busy else "idle",
        "run_command": shlex.join(cmd),
        "exit_status": rc,
        "whole_s": round(whole, 1),
        **summary,
    }
    run.write(figures, targets={"pytest_s": "<= 720 (two idle cores)" if args.lane == "ci" else "<= 180"},
              met=rc == 0 and summary["pytest_s"] <= (720 if args.lane == "ci" else 180))  # fmt: skip
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
