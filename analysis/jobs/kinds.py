"""The job kinds: each a function ``run(params: dict, ctx: JobContext) -> dict | None`` found by name.

The engine's own kinds live here and in :mod:`analysis.jobs.corpus_job` (``corpus-stats``: a corpus statistic
over a user's corpus); the kinds that need a paper method (a model check of an edit, a model export)
live in :mod:`analysis.views.model_jobs` and are named by module path (:data:`KINDS`, the way corpus statistics
plug methods in: :data:`analysis.jobs.stats.PLUGINS`), so the jobs tier imports no method.

``params`` is plain JSON: workspace items by name, model references by their source string, numbers and lists.
``ctx`` (:class:`analysis.jobs.queue.JobContext`) offers ``progress(fraction, stage)``, ``engine_progress`` (the
engine's ``progress(done, total, message)`` protocol), ``should_stop()``, ``log(line)`` and the job's workspace
(``file_path``, ``put_file``, ``put``).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from analysis.errors import DataError

#: kind → "module:function".
KINDS: dict[str, str] = {
    "wait": "analysis.jobs.kinds:wait_job",
    "model-check": "analysis.views.model_jobs:model_check_job",
    "gallery": "analysis.views.app_jobs:gallery_job",
    "compression": "analysis.views.app_jobs:compression_job",
    "verify-undertrained": "analysis.views.app_jobs:verify_undertrained_job",
    "model-export": "analysis.views.model_jobs:model_export_job",
    "corpus-stats": "analysis.jobs.corpus_job:corpus_job",
    "export-check": "analysis.views.export_check:export_check_job",
}


def kind_names() -> tuple[str, ...]:
    """Every job kind's name."""
    return tuple(KINDS)


def job_function(kind: str) -> Callable[[dict[str, Any], Any], dict[str, Any] | None]:
    """The function of job kind `kind` (DataError for an unknown kind)."""
    where = KINDS.get(kind)
    if where is None:
        raise DataError(f"unknown job kind {kind!r}; choose one of {', '.join(KINDS)}")
    module, name = where.split(":")
    return getattr(importlib.import_module(module), name)


def wait_job(params: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """A job that only waits: `steps` steps of `seconds` each with progress, optionally writing a small artifact
    (`artifact`: its name) — to check a deployment's workers, and the queue's own tests."""
    steps, seconds = int(params.get("steps", 5)), float(params.get("seconds", 0.2))
    for i in range(steps):
        ctx.progress(i / max(1, steps), f"step {i + 1} of {steps}")
        ctx.log(f"waited {i * seconds:.1f} s")
        time.sleep(seconds)
    if params.get("fail"):
        raise DataError(str(params["fail"]))
    name = params.get("artifact")
    if name:
        with TemporaryDirectory(prefix="toklab-job-") as tmp:
            out = Path(tmp) / "out.txt"
            out.write_text(f"{steps} steps\n", encoding="utf-8")
            ctx.put_file("artifact", str(name), {"job": "wait"}, out)
    ctx.progress(1.0, "done")
    return {"steps": steps}
