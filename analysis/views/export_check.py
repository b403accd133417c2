"""The export check for any export this app writes (the CLI's `export-check` and the pages' "Export check"
section call this one function): a method whose export is more than one tokenizer.json brings its own view
(R-BPE: :func:`analysis.methods.reuse.export_check.reuse_codec`); everything else is checked as a Hugging Face
folder or a GGUF file (:func:`analysis.evaluate.export_check.check_export`)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from analysis.core.progress import Progress
from analysis.evaluate.export_check import ExportCheckReport, check_export
from analysis.methods.reuse.export_check import reuse_codec
from analysis.tokenizer.tokenizer import LoadedTokenizer


def run_export_check(
    path: str | os.PathLike,
    *,
    base: LoadedTokenizer | None = None,
    original_model: str | os.PathLike | None = None,
    langs: Sequence[str] | None = None,
    max_lines: int | None = None,
    parity: bool = True,
    fix: bool = False,
    probe_model: bool = True,
    progress: Progress | None = None,
) -> ExportCheckReport:
    """Check an export folder or GGUF file (see :func:`analysis.evaluate.export_check.check_export`); an R-BPE
    folder is read through its method's view, its original tokenizer the default `base`."""
    codec = reuse_codec(path) if os.path.isdir(path) else None
    return check_export(
        path,
        base=base,
        original_model=original_model,
        langs=langs,
        max_lines=max_lines,
        parity=parity,
        fix=fix,
        codec=codec,
        probe_model=probe_model,
        progress=progress,
    )
