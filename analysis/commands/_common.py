"""What several sub-commands share: the tokenizer argument (a model's own tokenizer by default), corpus inputs
with the executor flags, the output-folder arguments and strict JSON output."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from analysis.core.outputs import json_ready, strict_json
from analysis.core.progress import stderr_progress
from analysis.errors import DataError, TokenizerLoadError
from analysis.jobs import CorpusRun, add_executor_arguments, compute, executor_from_args
from analysis.model.source import resolve_model, tokenizer_for_model
from analysis.texts import flores
from analysis.tokenizer.sources import load
from analysis.tokenizer.tokenizer import LoadedTokenizer


def flores_langs(
    spec: str | None, option: str = "--langs", data: flores.FloresData | None = None
) -> list[str] | None:
    """The FLORES codes a `--langs`-style option names ('all' or comma-separated codes, aliases accepted), checked
    the same way by every command: a list naming no language (``,,,``) or an unknown code is a DataError naming
    the option. None stays None (the command's default). `data`: another FLORES copy (default: the configured)."""
    if spec is None:
        return None
    try:
        return (data or flores.dataset()).resolve_many(spec)
    except DataError as e:
        raise DataError(f"{option}: {e}") from None


_TOKENIZER_HELP = (
    "folder, tokenizer.json, .gguf file (its embedded tokenizer) or hub id; "
    "with --model it defaults to the model's own tokenizer"
)


def add_tokenizer_argument(
    p: argparse.ArgumentParser, flag: str | None = None, *, required: bool = False, **kw
) -> None:
    """Add a TOKENIZER argument (folder, tokenizer.json, .gguf file or hub id) plus --revision/--token.

    The argument is optional on the command line: a command that also takes ``--model`` falls back to the
    model's own tokenizer (:func:`load_from_args`); one without a model says that a tokenizer is needed.
    `required` makes the positional form required: a command whose other positionals are variable-length (`decode
    TOKENIZER IDS…`) would otherwise take a lone tokenizer for an id and say that no tokenizer was given.
    """
    if flag:
        p.add_argument(flag, dest="tokenizer", default=None, help=_TOKENIZER_HELP, **kw)
    elif required:
        p.add_argument("tokenizer", help=_TOKENIZER_HELP, **kw)
    else:
        p.add_argument("tokenizer", nargs="?", default=None, help=_TOKENIZER_HELP, **kw)
    p.add_argument("--revision", default=None, help="hub revision (branch, tag or commit)")
    p.add_argument("--token", default=None, help="hub access token (gated or private repos)")


def load_from_args(args: argparse.Namespace, source: str | None = None) -> LoadedTokenizer:
    """Load the tokenizer an argument names; without one, the tokenizer of ``--model`` (its folder's tokenizer
    files, or the one embedded in a GGUF file: :func:`analysis.model.source.tokenizer_for_model`)."""
    src = source or getattr(args, "tokenizer", None)
    revision, token = getattr(args, "revision", None), getattr(args, "token", None)
    if src:
        return load(src, revision=revision, token=token)
    model = getattr(args, "model", None)
    if model:
        return tokenizer_for_model(resolve_model(model, revision=revision, token=token))
    with_model = " (or --model M, to use the model's own tokenizer)" if hasattr(args, "model") else ""
    raise TokenizerLoadError(
        f"no tokenizer given: name a folder, tokenizer.json, .gguf file or hub id{with_model}"
    )


def add_force_argument(p: argparse.ArgumentParser) -> None:
    """Add --force: replace a non-empty --out folder whole (without it, such a folder is refused)."""
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing non-empty --out folder (it is replaced whole, never merged)",
    )


def add_corpus_arguments(
    p: argparse.ArgumentParser,
    *flags: str,
    dest: str = "inputs",
    required: bool = False,
    help: str | None = None,
) -> None:
    """Add repeatable corpus inputs (default flags ``--text`` and ``--corpus``), ``--quiet`` and the executor
    group (:func:`analysis.jobs.add_executor_arguments`).

    Each input is a file, a folder, a quoted glob (``'DIR/*.devtest'``, ``'DIR/**/*.jsonl.gz'``), an
    ``hf://datasets/…`` path or another fsspec URL; every executor reads them through
    :mod:`analysis.texts.shards`, so the in-process run and a datatrove run count the same units.
    """
    p.add_argument(
        *(flags or ("--text", "--corpus")),
        dest=dest,
        action="append",
        default=[],
        required=required,
        metavar="PATH",
        help=help
        or "corpus: file, folder, quoted glob ('DIR/*.devtest') or hf://datasets/… path; repeatable",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    add_executor_arguments(p)


def compute_from_args(
    tok: LoadedTokenizer,
    stat: str,
    args: argparse.Namespace,
    *,
    inputs: Sequence[str] | None = None,
    options: dict | None = None,
    label: str | None = None,
) -> CorpusRun:
    """:func:`analysis.jobs.compute` with the command's executor flags and progress on stderr (unless
    ``--quiet``); `inputs` default to ``args.inputs`` (see :func:`add_corpus_arguments`)."""
    progress = None if getattr(args, "quiet", False) else stderr_progress(label or stat)
    return compute(
        tok,
        stat,
        list(args.inputs if inputs is None else inputs),
        options=options,
        executor=executor_from_args(args),
        progress=progress,
    )


def print_json(obj: Any) -> None:
    """Print one strict JSON document to stdout (UTF-8, no ASCII escaping; numpy values and sets converted,
    NaN and infinities written as null)."""
    sys.stdout.write(strict_json(json_ready(obj)) + "\n")


def add_robustness_argument(p: argparse.ArgumentParser) -> None:
    """Add --no-robustness: skip the robustness before → after of an edit (:mod:`analysis.measure.robustness`)."""
    p.add_argument(
        "--no-robustness",
        action="store_true",
        help="skip the robustness before → after (words kept whole per held-out language, digit grouping, "
        "round trip on hostile text, encode times on 512 KiB pathological inputs; a few seconds)",
    )


def print_robustness(rob: dict[str, Any] | None) -> None:
    """The robustness entry of an edit's report as text lines."""
    if not rob:
        return
    w = sys.stdout.write
    for r in rob["languages"]:
        w(f"  {r['lang']}: words kept whole (STRR) {r['strr_before']:.2%} → {r['strr_after']:.2%}; "
          f"{r['split_changed']:.2%} of {r['words']:,} words split differently\n")  # fmt: skip
    b, a = rob["before"], rob["after"]
    for side, d in (("before", b), ("after", a)):
        g = d["digits"]
        slow = ", ".join(e["input"] for e in d["encode_seconds"] if e["slow"]) or "none"
        worst = max((e["seconds"] for e in d["encode_seconds"]), default=0.0)
        w(f"  {side}: digits right-aligned {g['right']:.0%}, left {g['left']:.0%}, single {g['single']:.0%}, "
          f"other {g['other']:.0%}; round trip {d['round_trip']['ok']}/{d['round_trip']['total']} hostile texts; "
          f"slowest 512 KiB encode {worst:.2f} s (≥ 1 s: {slow})\n")  # fmt: skip
