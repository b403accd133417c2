"""The one place a benchmark writes its figures: `bench/results/<script>[-variant].json`.

Every `bench/*.py` script ends with :func:`record`, which writes one JSON document: the script and variant, the
date (UTC), the commit it ran on (``git rev-parse HEAD``, and whether the work tree had changes), the machine (CPU
model, cores, memory), the load average before and after, the command line, the figures it measured and the targets
they are held to. `bench/report.py` renders `docs/results.md` from these files (:func:`load_all`), so a figure is
never copied into a document by hand.

A figure measured before the benches wrote their own files was transcribed from the documents of the time: such a
file carries ``"source": "transcribed from <file> at commit <sha>"`` and the original date, and its figures keep the
words they were written in (``history``) where they were never a table.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from analysis.core.outputs import atomic_write_text, json_document  # noqa: E402

#: Where the results live (one file per script and variant; `TOKLAB_BENCH_RESULTS` redirects them, e.g. in tests).
RESULTS = ROOT / "bench" / "results"
#: The fields every results file has (transcribed ones may have `null` where the old documents did not say).
REQUIRED = ("script", "variant", "date", "commit", "machine", "load_average", "command", "figures", "targets")


def results_dir() -> Path:
    """The folder results are written to: `TOKLAB_BENCH_RESULTS` when set, else `bench/results/`."""
    return Path(os.environ.get("TOKLAB_BENCH_RESULTS") or RESULTS)


def commit() -> dict[str, Any]:
    """The commit the code ran on (``git rev-parse HEAD``) and whether tracked files had uncommitted changes;
    ``{"sha": None}`` outside a git checkout."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        )
        if sha.returncode != 0:
            return {"sha": None, "dirty": None}
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
        return {"sha": sha.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"sha": None, "dirty": None}


def _cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else what `platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    """Total memory in GiB (/proc/meminfo's MemTotal), None where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def machine() -> dict[str, Any]:
    """The machine a figure was measured on: CPU model, logical cores, memory, OS and Python."""
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "os": platform.platform(terse=True),
        "python": platform.python_version(),
    }


def load_average() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages, rounded (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


class Run:
    """One run of a benchmark: opened at the start (date, load before), closed by :meth:`write`.

    >>> run = Run("bench_load")            # at the top of main()
    >>> run.write({"ratio": 1.4}, targets={"ratio": "<= 1.5"})    # doctest: +SKIP
    """

    def __init__(self, script: str, variant: str | None = None, argv: list[str] | None = None) -> None:
        self.script = Path(script).stem
        self.variant = variant or None
        self.argv = list(sys.argv if argv is None else argv)
        self.started = _dt.datetime.now(_dt.UTC)
        self.load_before = load_average()

    def document(
        self, figures: dict[str, Any], *, targets: dict[str, Any] | None = None, met: bool | None = None
    ) -> dict[str, Any]:
        """The results document of this run (nothing written)."""
        argv = self.argv
        if argv and argv[0].endswith(".py"):
            argv = [os.path.relpath(argv[0], ROOT) if os.path.isabs(argv[0]) else argv[0], *argv[1:]]
        return {
            "script": self.script,
            "variant": self.variant,
            "date": self.started.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "seconds": round((_dt.datetime.now(_dt.UTC) - self.started).total_seconds(), 1),
            "commit": commit(),
            "machine": machine(),
            "load_average": {"before": self.load_before, "after": load_average()},
            "command": "python " + shlex.join(argv),
            "figures": figures,
            "targets": targets or {},
            "met": met,
        }

    def path(self) -> Path:
        """`<results>/<script>[-<variant>].json`."""
        name = self.script + (f"-{self.variant}" if self.variant else "")
        return results_dir() / f"{name}.json"

    def write(
        self, figures: dict[str, Any], *, targets: dict[str, Any] | None = None, met: bool | None = None
    ) -> Path:
        """Write this run's document (atomically, replacing the last run of the same script and variant) and
        print where it went; returns the path."""
        doc = self.document(figures, targets=targets, met=met)
        out = self.path()
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out, json_document(doc))
        shown = out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out
        print(f"results written to {shown}")
        return out


#: Options that change how a figure is taken or where it goes, not what is measured: never part of a variant.
NOT_VARIANT = frozenset({"json", "json_out", "out", "keep", "scratch", "deadline", "cap_languages", "cap_warmup",
                         "repeat", "repeats", "rounds", "visits", "job", "memory_child", "cache_child"})  # fmt: skip


def _part(value: Any) -> str:
    """One option value in a file name: a path by its last part, spaces and separators as dashes."""
    text = str(value)
    if "/" in text:
        text = Path(text.rstrip("/")).name or text
    return re.sub(r"[^A-Za-z0-9_.+]+", "-", text).strip("-")


def variant_of(**options: Any) -> str | None:
    """A variant name from the options that change what is measured (truthy ones only, in the order given):
    ``variant_of(case="flores-latin", hog=True)`` → ``"flores-latin-hog"``; None when none is set."""
    parts = []
    for key, value in options.items():
        if value is True:
            parts.append(key.replace("_", "-"))
        elif value not in (None, False, "", 0):
            parts.append(_part(value))
    return "-".join(parts)[:80] or None


def variant_from(
    parser: argparse.ArgumentParser, args: argparse.Namespace, *, ignore: Sequence[str] = ()
) -> str | None:
    """The variant of a run: every option given a value other than its default (`NOT_VARIANT` and `ignore` left
    out), so that a run on other inputs (another tokenizer, fewer languages) never replaces the default run's
    file. A `--variant NAME` option is taken as it is."""
    parts: dict[str, Any] = {}
    for action in parser._actions:
        dest = action.dest
        if dest in ("help", *NOT_VARIANT, *ignore) or not hasattr(args, dest):
            continue
        value = getattr(args, dest)
        if value == action.default:
            continue
        if dest == "variant" or value is True:
            parts[dest] = value
        else:
            parts[dest] = f"{dest.replace('_', '-')}-{_part(value)}"
    return variant_of(**parts)


def load_all(folder: str | os.PathLike | None = None) -> dict[str, dict[str, Any]]:
    """Every results document in `folder` (default: :func:`results_dir`), by file stem, sorted by name.
    Files that are not bench results (no ``script`` key, e.g. a raw GPU summary) are returned as they are."""
    d = Path(folder) if folder is not None else results_dir()
    out: dict[str, dict[str, Any]] = {}
    for p in sorted(d.glob("*.json")):
        out[p.stem] = json.loads(p.read_text(encoding="utf-8"))
    return out
