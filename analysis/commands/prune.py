"""`python -m analysis prune --tokenizer T --order O --text PATH … --n N --out DIR [--model M] --json`.

The corpus orders (frequency, leaf-frequency, merge-based) count token frequencies over the Prune page's FLORES
mix (``--flores LANG``: the first ``--flores-lines`` devtest lines of each language, the rest held out and measured)
or over every `--text` input
(files, folders, globs, ``hf://`` paths; summed) as one corpus statistic of :mod:`analysis.jobs`
(`token-ids`, or `merge-counts` for merge-based): in this process, or with ``--executor local|slurm|ray`` on
many cores with the same counts, hence the same order and the same pruned tokenizer. The report printed with
``--json`` is the one written as ``prune_report.json`` (:class:`analysis.methods.pruning.report.PruneReport`).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from analysis.core.inputs import parse_json, read_file, whole_number
from analysis.core.outputs import check_output_folder
from analysis.errors import DataError
from analysis.jobs import CorpusRun
from analysis.measure.robustness import robustness_delta
from analysis.methods import pruning
from analysis.methods.pruning.report import MODEL_INITS, prune_report, write_pruned
from analysis.texts.corpora import iter_file
from analysis.texts.flores import ENGLISH, FLORES_TRAIN_LINES, dataset, split_lines
from analysis.tokenizer.tokenizer import LoadedTokenizer

from ._common import (
    add_corpus_arguments,
    add_force_argument,
    add_robustness_argument,
    add_tokenizer_argument,
    compute_from_args,
    load_from_args,
    print_json,
    print_robustness,
)
from ._gguf import add_gguf_arguments, write_gguf_from_args

NAME = "prune"
HELP = (
    "prune N tokens in a chosen order (merges, ids, added tokens kept consistent); optionally the model too"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the arguments of `prune`."""
    add_tokenizer_argument(p, "--tokenizer")
    p.add_argument("--order", required=True, choices=pruning.ORDERS, help="pruning order")
    p.add_argument("--n", type=whole_number(0), required=True, help="number of tokens to prune")
    p.add_argument("--out", required=True, help="output folder (Hugging Face tokenizer folder, + model)")
    add_force_argument(p)
    p.add_argument(
        "--model", default=None, help="model folder / weight file / hub id whose embeddings to prune"
    )
    p.add_argument(
        "--init",
        default="fvt",
        choices=MODEL_INITS,
        help="init of new embedding rows (only used when ids are added)",
    )
    p.add_argument(
        "--allowed-scripts",
        default=",".join(pruning.FIRST_VIEW_SCRIPTS),
        help="script order: comma-separated scripts to keep (Common/Inherited always kept; default "
        f"{','.join(pruning.FIRST_VIEW_SCRIPTS)})",
    )
    p.add_argument(
        "--flores",
        action="append",
        default=[],
        metavar="LANG",
        help="corpus orders: token frequencies from the Prune page's mix, the first --flores-lines FLORES-200 "
        "devtest lines of each LANG in equal shares (repeatable); the rest of each language's lines is held out "
        "and measured (bytes/token before/after, robustness)",
    )
    p.add_argument(
        "--flores-lines",
        type=whole_number(1),
        default=pruning.FIRST_VIEW_TRAIN_LINES,
        metavar="N",
        help=f"FLORES lines per --flores language in the mix (default {pruning.FIRST_VIEW_TRAIN_LINES})",
    )
    p.add_argument(
        "--mix-text",
        action="append",
        default=[],
        metavar="FILE",
        help="a text joining the --flores mix (the page's uploads): then every part has an equal share of bytes",
    )
    p.add_argument(
        "--scores",
        default=None,
        metavar="FILE",
        help="score order: JSON {id: score} or [score, ...]; lowest pruned first (leaves only)",
    )
    p.add_argument(
        "--extend-text",
        action="append",
        default=[],
        metavar="FILE",
        help="after pruning, extend back by N with continued BPE training on these files",
    )
    p.add_argument("--no-stt", action="store_true", help="skip the Self-Tokenization Test of the result")
    p.add_argument("--robustness-flores", action="append", default=[], metavar="LANG",
                   help=f"held-out FLORES lines {FLORES_TRAIN_LINES + 1}–1012 of LANG for the robustness before → "
                   f"after (repeatable; default {ENGLISH})")  # fmt: skip
    add_robustness_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object (the prune report)")
    add_gguf_arguments(p)
    add_corpus_arguments(
        p,
        help="token frequencies for the frequency, leaf-frequency and merge-based orders: a file, folder, "
        "quoted glob ('DIR/*.devtest') or hf://datasets/… path; repeatable, counts summed over all",
    )


def _read_lines(files: list[str]) -> list[list[str]]:
    out = []
    for f in files:
        lines = list(iter_file(f))  # bounded, strict UTF-8 (analysis.core.inputs)
        if not lines:
            raise DataError(f"text file {f} is empty")
        out.append(lines)
    return out


def flores_mix(args: argparse.Namespace) -> tuple[list[str], dict[str, list[str]]]:
    """The Prune page's text mix and held-out lines (:func:`analysis.methods.pruning.flores_mix`) of --flores,
    --flores-lines and --mix-text; nothing without --flores or --mix-text."""
    if not (args.flores or args.mix_text):
        return [], {}
    if args.inputs:
        raise DataError("give the frequencies' text with --text or with --flores/--mix-text, not both")
    langs = dataset().resolve_many(",".join(args.flores)) if args.flores else []
    return pruning.flores_mix(langs, args.flores_lines, _read_lines(args.mix_text))


def corpus_counts(
    tok: LoadedTokenizer, args: argparse.Namespace, mix: list[str] | None = None
) -> tuple[dict[str, Any], CorpusRun | None]:
    """The frequencies a corpus order needs (`counts=` or `merges=` of :func:`analysis.methods.pruning.compute_order`),
    counted over the `--text` inputs on the chosen executor, or `texts=` the --flores mix; ({}, None) for the other
    orders."""
    corpus = pruning.ORDER_REGISTRY[args.order].corpus
    if corpus is None:
        return {}, None
    if mix:
        return {"texts": mix}, None
    if not args.inputs:
        raise DataError(f"the {args.order} order needs at least one --text FILE (a file, folder or glob)")
    stat, keyword = corpus
    run = compute_from_args(tok, stat, args, label=f"prune: {stat.replace('-', ' ')}")
    return {keyword: np.asarray(run.result) if keyword == "counts" else run.result}, run


def _read_scores(path: str) -> dict[int, float]:
    data = parse_json(read_file(path), f"scores file {path}")
    try:
        if isinstance(data, list):
            scores = {i: float(v) for i, v in enumerate(data)}
        else:
            scores = {int(k): float(v) for k, v in data.items()}
    except (TypeError, ValueError, AttributeError, OverflowError) as e:
        raise DataError(f"{path}: expected {{id: score}} or a list of scores ({e})") from e
    if not all(math.isfinite(v) for v in scores.values()):
        raise DataError(f"{path}: scores must be finite numbers (found NaN or infinity)")
    return scores


def _robustness_languages(args: argparse.Namespace) -> list[str]:
    """The FLORES languages of the robustness rows, checked before the work: none with --no-robustness, the --flores
    languages (as the page), and none by default when no FLORES data is installed (a language named with
    --robustness-flores must exist)."""
    if args.no_robustness:
        return []
    if args.flores and not args.robustness_flores:
        return dataset().resolve_many(",".join(args.flores))
    try:
        data = dataset()
    except DataError:
        if args.robustness_flores:
            raise
        return []
    return data.resolve_many(args.robustness_flores or [ENGLISH])


def run(args: argparse.Namespace) -> int:
    """Compute the order, prune, write the folder (and model), print the report."""
    check_output_folder(args.out, replace=args.force)  # before the work, not after it
    tok = load_from_args(args)
    pruning.check_prunable(tok)
    langs = _robustness_languages(args)
    mix, held = flores_mix(args)
    freq, corpus_run = corpus_counts(tok, args, mix)
    order = pruning.compute_order(
        tok,
        args.order,
        scores=_read_scores(args.scores) if args.scores else None,
        allowed_scripts=[s.strip() for s in args.allowed_scripts.split(",") if s.strip()],
        **freq,
    )
    res = pruning.prune_by_order(tok, order, args.n)
    final, id_map, added = res.tokenizer, res.id_map, []
    if args.extend_text:
        ext_lines = [ln for part in _read_lines(args.extend_text) for ln in part]
        pe = pruning.prune_then_extend(tok, order, args.n, ext_lines)
        final, id_map, added = pe.tokenizer, pe.id_map, pe.added
    report = prune_report(
        tok,
        args.order,
        res,
        final=final,
        id_map=id_map,
        added=added,
        stt=not args.no_stt,
        out=args.out,
        corpus=corpus_run.summary() if corpus_run is not None else None,
    )
    if langs:
        # the --flores languages on the lines the mix held out (the page's), the others on FLORES's held-out lines
        rob = {lang: held.get(lang) or split_lines(lang)[1] for lang in langs}
        report.robustness = robustness_delta(tok, final, rob).to_json()
    write_pruned(
        tok, res, args.out, report, model=args.model, init=args.init, replace=args.force, final=final
    )
    gguf = write_gguf_from_args(args, final, tok)
    heldout = {lang: {"bytes_per_token_before": pruning.bytes_per_token(tok, lines),
                      "bytes_per_token_after": pruning.bytes_per_token(final, lines)}
               for lang, lines in held.items()}  # fmt: skip
    if args.json:
        print_json(
            {
                **report.to_json(),
                **({"heldout": heldout} if heldout else {}),
                **({"gguf": gguf} if gguf else {}),
            }
        )
        return 0
    for lang, h in heldout.items():
        print(
            f"{'bytes/token ' + lang:>20}: {h['bytes_per_token_before']:.4f} → {h['bytes_per_token_after']:.4f}"
        )
    if gguf:
        print(f"{'gguf':>20}: {gguf['file']} ({gguf['source']}, {gguf['bytes']:,} bytes)")
    for k, v in report.to_json().items():
        if k == "robustness":
            continue
        if k == "id_map":
            v = f"{len(v):,} ids (in {args.out}/prune_report.json)"
        print(f"{k:>20}: {v}")
    print_robustness(report.robustness)
    return 0
