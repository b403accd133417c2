"""What the bad-input suite asserts about every run: a clear `error:` line (exit status 2) and no traceback, strict
JSON, bounded peak memory, and the files a run left behind."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

#: Peak resident memory allowed to any CLI run of the suite (a fresh interpreter with the engine imported and
#: GPT-2 loaded takes 50–90 MB); the bombs of the report cost 2.3 to 8 GB before the fixes.
PEAK_MB_BOUND = 400

#: A subprocess prints its own peak RSS last, so that it is measured even when the command fails. VmHWM (the
#: high-water mark of this process image) is read rather than ru_maxrss, which Linux carries over from the
#: parent's memory at fork/exec (a pytest process holding test data would inflate it).
RUNNER = """
import sys
from analysis.cli import main
try:
    rc = main(sys.argv[1:])
except SystemExit as e:
    rc = e.code if isinstance(e.code, int) else 1
sys.stdout.flush()
with open("/proc/self/status") as fh:
    hwm = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
sys.stderr.write(f"\\n@@peak_mb={hwm // 1024}\\n")
sys.exit(rc)
"""


@dataclass
class Run:
    """What one CLI run did."""

    rc: int
    out: str
    err: str
    peak_mb: int | None = None


def strict_loads(text: str):
    """json.loads that refuses NaN and ±Infinity (as standard parsers do)."""

    def refuse(name: str):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def assert_clear_error(run: Run, *words: str) -> None:
    """Exit status 2, one `error:` line naming the problem, no traceback, no Rust panic, nothing on stdout."""
    assert run.rc == 2, (run.rc, run.err[-2000:])
    assert "Traceback" not in run.err and "panicked" not in run.err, run.err[-2000:]
    lines = [ln for ln in run.err.splitlines() if ln.strip() and not ln.startswith("@@peak")]
    assert lines and lines[-1].startswith("error: "), run.err[-2000:]
    for w in words:
        assert w.lower() in run.err.lower(), (w, run.err[-2000:])


def tree(folder: Path) -> dict[str, int]:
    """Relative path → size of every file below a folder (hidden ones included)."""
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*") if p.is_file()}
